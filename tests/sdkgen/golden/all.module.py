from __future__ import annotations
import threading as _threading  # noqa: E402 (the generated module starts here)

_recording = _threading.local()


class ToolCallError(Exception):
    """A tool call failed or was denied; ``str(e)`` is ``"<tool>: <code>: <message>"``."""

    def __init__(self, tool: str, code: str, message: str) -> None:
        super().__init__(tool, code, message)
        self.tool = tool
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.tool}: {self.code}: {self.message}"


# Host operations sent as calls under names no tool can have (worker._messages checks
# their arguments exactly: the host answers them without the pipeline).
_SEARCH = "catalog:search"
_DESCRIBE = "catalog:describe"
_MAX_QUERY_CHARS = 1000
_MAX_LIMIT = 50
_MAX_DESCRIBE = 50


class _Pending:
    """What a tool call returns while a ``parallel`` thunk is being recorded."""

    __slots__ = ()


def _send(calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    answers = __transport__.call_batch(calls)  # noqa: F821 (injected global)
    if len(answers) != len(calls):
        raise RuntimeError(f"transport answered {len(answers)} of {len(calls)} calls")
    for (tool, _args), (ok, payload) in zip(calls, answers, strict=True):
        if not ok:
            code, message = payload
            raise ToolCallError(tool, str(code), str(message))
    return [payload for _ok, payload in answers]


# JSON has no tuples: a tuple passed where the schema wants an array is sent as a list.
# Deeper than the protocol's nesting limit nothing is converted (the transport refuses it).
_MAX_DEPTH = 200


def _as_lists(value: Any, depth: int = 0) -> Any:
    kind = type(value)
    if depth > _MAX_DEPTH:
        return value
    if kind is tuple or kind is list:
        return [_as_lists(item, depth + 1) for item in value]
    if kind is dict:
        return {key: _as_lists(item, depth + 1) for key, item in value.items()}
    return value


def _invoke(tool: str, arguments: dict[str, Any], extra: dict[str, Any] | None = None) -> Any:
    # `...` is the default of every optional parameter: left out means not sent.
    sent = {key: value for key, value in arguments.items() if value is not ...}
    if extra:
        # Other keys an open input schema accepts; a declared key goes by its parameter.
        clash = sorted(key for key in extra if key in arguments)
        if clash:
            raise TypeError(
                f"{tool}: {', '.join(map(repr, clash))} must be passed by parameter name, "
                "not as an extra keyword"
            )
        sent.update(extra)
    sent = _as_lists(sent)
    recorded = getattr(_recording, "calls", None)
    if recorded is not None:
        marker = _Pending()
        recorded.append((tool, sent, marker))
        return marker
    return _send([(tool, sent)])[0]


def _call(name: str, /, **arguments: Any) -> Any:
    """``tools.call(name, **arguments)``: a tool by its original name (or identifier), its
    arguments under their original keys."""
    if type(name) is not str:
        raise TypeError("tools.call(name, **arguments): name must be a string")
    if name not in _TOOL_IDENTS:
        ident = name
        name = _TOOL_NAMES.get(ident, "")
        if not name:
            raise ToolCallError(
                ident, "UNKNOWN_TOOL", "no visible tool has this name; find tools with "
                "catalog.search('what it does')"
            )
    return _invoke(name, {}, arguments)


def _host(op: str, label: str, arguments: dict[str, Any]) -> Any:
    if getattr(_recording, "calls", None) is not None:
        raise TypeError(f"{label}() cannot be used inside a parallel() thunk")
    try:
        return _send([(op, arguments)])[0]
    except ToolCallError as exc:
        raise ToolCallError(label, exc.code, exc.message) from None


class _Catalog:
    """``catalog``: find the visible tools (``search``) and read their stubs (``describe``).
    Each is a round trip to the host, which answers it without running anything."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise TypeError("catalog is read-only")

    def __repr__(self) -> str:
        return "<catalog: search(query, limit=10), describe(*idents)>"

    def search(self, query: str, limit: int = 10) -> list[dict[str, str]]:
        """The tools that best match ``query``, best first: ``{"name", "ident", "summary"}``."""
        if type(query) is not str or not query.strip():
            raise TypeError("catalog.search(query): query must be a non-empty string")
        if len(query) > _MAX_QUERY_CHARS:
            raise ValueError(f"catalog.search(): query longer than {_MAX_QUERY_CHARS} characters")
        if type(limit) is not int or not 1 <= limit <= _MAX_LIMIT:
            raise ValueError(f"catalog.search(): limit must be an int from 1 to {_MAX_LIMIT}")
        return _host(_SEARCH, "catalog.search", {"query": query, "limit": limit})  # type: ignore[no-any-return]

    def describe(self, *idents: Any) -> str:
        """The typed stub (signature, types, docstring) of these tools, by identifier or
        original name; ``describe(["a", "b"])`` works too."""
        if len(idents) == 1 and isinstance(idents[0], list | tuple):
            idents = tuple(idents[0])
        if not idents or not all(type(i) is str and 0 < len(i) <= 256 for i in idents):
            raise TypeError("catalog.describe(*idents): give tool identifiers (strings)")
        if len(idents) > _MAX_DESCRIBE:
            raise ValueError(f"catalog.describe(): at most {_MAX_DESCRIBE} tools at a time")
        return _host(_DESCRIBE, "catalog.describe", {"idents": list(idents)})  # type: ignore[no-any-return]


catalog = _Catalog()


def _run_recorded(what: str, thunks: Sequence[object]) -> list[Any]:
    if getattr(_recording, "calls", None) is not None:
        raise TypeError(f"{what} cannot be used inside a parallel() thunk")
    calls: list[tuple[str, dict[str, Any]]] = []
    for i, thunk in enumerate(thunks):
        if not callable(thunk):
            raise TypeError(f"{what}: argument {i} is not callable; pass lambda: tools.x(...)")
        recorded: list[tuple[str, dict[str, Any], _Pending]] = []
        _recording.calls = recorded
        try:
            result = thunk()
        finally:
            _recording.calls = None
        if len(recorded) != 1:
            raise TypeError(
                f"{what}: thunk {i} made {len(recorded)} tool calls; each must make exactly "
                "one and return its result, e.g. lambda: tools.x(a=1)"
            )
        tool, arguments, marker = recorded[0]
        if result is not marker:
            raise TypeError(
                f"{what}: thunk {i} must return its tool call's result unchanged, "
                "e.g. lambda: tools.x(a=1); post-process the list parallel() returns"
            )
        calls.append((tool, arguments))
    return _send(calls) if calls else []


def parallel(*thunks: object) -> list[Any]:
    """Run one tool call per thunk as one batch; results (or the first error) in order."""
    if len(thunks) == 1 and isinstance(thunks[0], list | tuple):
        thunks = tuple(thunks[0])
    return _run_recorded("parallel()", list(thunks))


class _Tool:
    """``tools.<ident>``: call it with keyword arguments, or ``.map`` a list of them."""

    __slots__ = ("_extra", "_fn", "_ident", "_params", "_required")
    _extra: bool
    _fn: Callable[..., Any]
    _ident: str
    _params: tuple[str, ...]
    _required: tuple[str, ...]

    def __init__(self, fn: Callable[..., Any]) -> None:
        code = fn.__code__
        params = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
        defaults = fn.__kwdefaults__ or {}
        for slot, value in (
            ("_extra", bool(code.co_flags & 0x08)),  # inspect.CO_VARKEYWORDS: `**extra`
            ("_fn", fn),
            ("_ident", fn.__name__),
            ("_params", params),
            ("_required", tuple(p for p in params if p not in defaults)),
        ):
            object.__setattr__(self, slot, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise TypeError("SDK tools are read-only")

    def __repr__(self) -> str:
        return f"<tool {self._ident}({', '.join(self._params)})>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args:
            raise TypeError(f"tools.{self._ident}() takes keyword arguments only")
        unknown = [] if self._extra else sorted(k for k in kwargs if k not in self._params)
        if unknown:
            valid = ", ".join(self._params) or "none"
            raise TypeError(
                f"tools.{self._ident}() got unexpected keyword argument(s) "
                f"{', '.join(unknown)}; valid: {valid}"
            )
        missing = [p for p in self._required if p not in kwargs]
        if missing:
            raise TypeError(
                f"tools.{self._ident}() missing required keyword argument(s): " + ", ".join(missing)
            )
        return self._fn(**kwargs)

    def map(self, calls: object) -> list[Any]:
        """Call the tool once per dict of keyword arguments, all in one batch."""
        if not isinstance(calls, list | tuple):
            raise TypeError(f"tools.{self._ident}.map() takes a list of keyword dicts")
        thunks: list[object] = []
        for i, kwargs in enumerate(calls):
            if not isinstance(kwargs, dict):
                raise TypeError(f"tools.{self._ident}.map(): item {i} is not a dict")
            thunks.append(self._thunk(kwargs))
        return _run_recorded(f"tools.{self._ident}.map()", thunks)

    def _thunk(self, kwargs: dict[str, Any]) -> Callable[[], Any]:
        return lambda: self(**kwargs)


class _Namespace(type):
    """Metaclass of ``tools``: read-only, not instantiable, helpful on a wrong name."""

    def __setattr__(cls, name: str, value: object) -> None:
        raise TypeError("tools is read-only")

    def __delattr__(cls, name: str) -> None:
        raise TypeError("tools is read-only")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("tools is a namespace: call tools.<name>(...)")

    def __getattr__(cls, name: str) -> Any:
        names = sorted(k for k, v in vars(cls).items() if isinstance(v, _Tool))
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        raise AttributeError(
            f"no tool {name!r}; tools: {shown or 'none'} (find tools with catalog.search(...);"
            " call one by its original name with tools.call('name', ...))"
        )


_tool = _Tool
__sdk__ = _invoke
# Filled by the generated part: identifier -> original name of every tool.
_TOOL_NAMES: dict[str, str] = {}
_TOOL_IDENTS: dict[str, str] = {}


@_tool
def annotate(*, record, label=..., extra=..., **extra_):
    return __sdk__('annotate', {'record': record, 'label': label, 'extra': extra}, extra_)


@_tool
def anything(**extra):
    return __sdk__('anything', {}, extra)


@_tool
def class_(*, from_, import_=..., filter=..., **extra):
    return __sdk__('class', {'from': from_, 'import': import_, 'filter': filter}, extra)


@_tool
def get_weather_v2(*, my_city_2, p_2fa=..., my_city=..., **extra):
    return __sdk__('get-weather.v2', {'my-city': my_city_2, '2fa': p_2fa, 'my_city': my_city}, extra)


@_tool
def legacy_range(*, low):
    return __sdk__('legacy_range', {'low': low})


@_tool
def list_(**extra):
    return __sdk__('list', {}, extra)


@_tool
def log_event(*, message, **extra):
    return __sdk__('log_event', {'message': message}, extra)


@_tool
def mcp_server_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_xxxxxxxxx(*, q=...):
    return __sdk__('mcp.server-very_long_segment.very_long_segment.very_long_segment.very_long_segment.very_long_segment.very_long_segment.xxxxxxxxx', {'q': q})


@_tool
def now():
    return __sdk__('now', {})


@_tool
def odd(*, x=..., **extra):
    return __sdk__('odd', {'x': x}, extra)


@_tool
def pair(*, point):
    return __sdk__('pair', {'point': point})


@_tool
def patterned(*, name=..., **extra):
    return __sdk__('patterned', {'name': name}, extra)


@_tool
def pay(*, method, amount, note=..., tags=..., **extra):
    return __sdk__('pay', {'method': method, 'amount': amount, 'note': note, 'tags': tags}, extra)


@_tool
def search_flights(*, route, passengers, max_price=...):
    return __sdk__('search_flights', {'route': route, 'passengers': passengers, 'max_price': max_price})


@_tool
def set_status(*, status, level=...):
    return __sdk__('set_status', {'status': status, 'level': level})


@_tool
def tools__2(**extra):
    return __sdk__('tools', {}, extra)


@_tool
def tools_(**extra):
    return __sdk__('tools_', {}, extra)


@_tool
def tree_walk(*, root, **extra):
    return __sdk__('tree_walk', {'root': root}, extra)


_TOOL_NAMES = {
    'annotate': 'annotate',
    'anything': 'anything',
    'class_': 'class',
    'get_weather_v2': 'get-weather.v2',
    'legacy_range': 'legacy_range',
    'list_': 'list',
    'log_event': 'log_event',
    'mcp_server_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_xxxxxxxxx': 'mcp.server-very_long_segment.very_long_segment.very_long_segment.very_long_segment.very_long_segment.very_long_segment.xxxxxxxxx',
    'now': 'now',
    'odd': 'odd',
    'pair': 'pair',
    'patterned': 'patterned',
    'pay': 'pay',
    'search_flights': 'search_flights',
    'set_status': 'set_status',
    'tools__2': 'tools',
    'tools_': 'tools_',
    'tree_walk': 'tree_walk',
}
_TOOL_IDENTS = {name: ident for ident, name in _TOOL_NAMES.items()}
tools = _Namespace('tools', (), {
    'annotate': annotate,
    'anything': anything,
    'class_': class_,
    'get_weather_v2': get_weather_v2,
    'legacy_range': legacy_range,
    'list_': list_,
    'log_event': log_event,
    'mcp_server_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_xxxxxxxxx': mcp_server_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_very_long_segment_xxxxxxxxx,
    'now': now,
    'odd': odd,
    'pair': pair,
    'patterned': patterned,
    'pay': pay,
    'search_flights': search_flights,
    'set_status': set_status,
    'tools__2': tools__2,
    'tools_': tools_,
    'tree_walk': tree_walk,
    'call': staticmethod(_call),
})
