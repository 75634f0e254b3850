from __future__ import annotations
import opcode as _opcode  # noqa: E402 (the generated module starts here)
import sys as _sys  # noqa: E402
import threading as _threading  # noqa: E402
from collections.abc import Coroutine as _Coroutine  # noqa: E402

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


# Host operations sent as calls under names no tool can have (worker._protocol._messages checks
# their arguments exactly: the host answers them without the pipeline).
_SEARCH = "catalog:search"
_DESCRIBE = "catalog:describe"
_MAX_QUERY_CHARS = 1000
_MAX_LIMIT = 50
_MAX_DESCRIBE = 50
_LABELS = {_SEARCH: "catalog.search", _DESCRIBE: "catalog.describe"}
"""How a host operation is named to the program (in errors, and in async code)."""


class _Pending:
    """What a tool call returns while a ``parallel`` thunk is being recorded."""

    __slots__ = ()


def _answers(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, Any]]:
    """One batch to the host: per call, ``(True, value)`` or ``(False, ToolCallError)``."""
    answers = __transport__.call_batch(calls)  # noqa: F821 (injected global)
    if len(answers) != len(calls):
        raise RuntimeError(f"transport answered {len(answers)} of {len(calls)} calls")
    out: list[tuple[bool, Any]] = []
    for (tool, _args), (ok, payload) in zip(calls, answers, strict=True):
        if ok:
            out.append((True, payload))
        else:
            code, message = payload
            label = _LABELS.get(tool, tool)
            out.append((False, ToolCallError(label, str(code), str(message))))
    return out


def _send(calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """One batch to the host: the values, or the first error in submission order."""
    answers = _answers(calls)
    for ok, payload in answers:
        if not ok:
            raise payload
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


def _invoke(
    tool: str, arguments: dict[str, Any], extra: dict[str, Any] | None = None, label: str = ""
) -> Any:
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
    if _in_async_code():
        # The generated function calling this is named after the tool's identifier.
        return _AsyncCall(tool, sent, label or f"tools.{_sys._getframe(1).f_code.co_name}")
    return _send([(tool, sent)])[0]


# --- async code: a call is a coroutine; calls awaited together are one batch ------------

_CO_ASYNC = 0x80 | 0x200  # inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_SEE_THROUGH = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>", "<lambda>"})
# `await` and `async with` compile to GET_AWAITABLE, `async for` to GET_ANEXT.
_AWAIT_OPS = frozenset(_opcode.opmap[name] for name in ("GET_AWAITABLE", "GET_ANEXT"))
_awaiting: dict[CodeType, bool] = {}


def _in_async_code() -> bool:
    """Whether the program code making this call runs in a coroutine that awaits: the
    first frame outside this module, seen through comprehensions and lambdas (``[tools.x(
    id=i) for i in ids]`` inside ``async def`` is async code; a plain ``def`` it calls is
    not, nor an ``async def`` whose body never awaits: its author wrote sync code)."""
    frame: FrameType | None = _sys._getframe(1)
    sdk = globals()
    while frame is not None and frame.f_globals is sdk:
        frame = frame.f_back
    while frame is not None and frame.f_code.co_name in _SEE_THROUGH:
        frame = frame.f_back
    if frame is None or not frame.f_code.co_flags & _CO_ASYNC:
        return False
    code = frame.f_code
    awaits = _awaiting.get(code)
    if awaits is None:  # read once per code object: 2-byte code units, the opcode first
        raw = code.co_code
        awaits = _awaiting[code] = any(raw[i] in _AWAIT_OPS for i in range(0, len(raw), 2))
    return awaits


_waiting: dict[object, list[tuple[str, dict[str, Any], Any]]] = {}
"""Per running event loop: the calls awaited in this turn, sent together at its end."""


def _flush(loop: Any) -> None:
    batch = _waiting.pop(loop, [])
    try:
        answers = _answers([(tool, arguments) for tool, arguments, _ in batch])
    except BaseException as exc:  # a limit, the run ending: every waiter gets it
        answers = [(False, exc)] * len(batch)
    for (_tool, _arguments, future), (ok, payload) in zip(batch, answers, strict=True):
        if future.done():
            continue  # its awaiting task was cancelled meanwhile
        if ok:
            future.set_result(payload)
        else:
            future.set_exception(payload)


class _AsyncCall(_Coroutine):  # type: ignore[type-arg]  # subscripted, it fails at run time
    """What ``tools.<ident>(...)`` (``tools.call``, ``catalog.search``/``describe``)
    returns in async code: a coroutine whose value is the call's. Nothing is sent until it
    is awaited (or run as a task); then it joins the calls awaited in the same turn of the
    event loop, sent to the host as one batch."""

    __slots__ = ("__name__", "__qualname__", "_arguments", "_steps", "_tool")

    def __init__(self, tool: str, arguments: dict[str, Any], name: str) -> None:
        self._tool = tool
        self._arguments = arguments
        self._steps: Any = None
        self.__name__ = self.__qualname__ = name

    def _run(self) -> Any:
        asyncio = _sys.modules.get("asyncio")
        try:
            loop = asyncio.get_running_loop() if asyncio is not None else None
        except RuntimeError:
            loop = None
        if loop is None:  # driven by hand or by another framework: call at once
            return _send([(self._tool, self._arguments)])[0]
        future = loop.create_future()
        batch = _waiting.setdefault(loop, [])
        if not batch:
            loop.call_soon(_flush, loop)
        batch.append((self._tool, self._arguments, future))
        return (yield from future)

    def _started(self) -> Any:
        if self._steps is None:
            self._steps = self._run()
        return self._steps

    def __await__(self) -> Any:
        if self._steps is not None:
            raise RuntimeError(f"cannot reuse already awaited {self.__name__}(...)")
        return self._started()

    def send(self, value: Any) -> Any:
        return self._started().send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        return self._started().throw(typ, val, tb)

    def close(self) -> None:
        if self._steps is None:
            self._steps = iter(())  # closed before it ran: nothing to warn about
        else:
            self._steps.close()

    def __del__(self) -> None:
        if self._steps is None:
            import warnings

            warnings.warn(
                f"{self.__name__}(...) was never awaited, so the call was not made: write "
                f"`await {self.__name__}(...)`",
                RuntimeWarning,
                stacklevel=1,
            )

    def __repr__(self) -> str:
        return f"<{self.__name__}(...): not awaited, write await {self.__name__}(...)>"

    def _not_a_value(self, *args: object) -> Any:
        raise TypeError(
            f"{self.__name__}(...) in async code is a coroutine, not the call's result: "
            f"write `await {self.__name__}(...)`"
        )

    __getitem__ = __iter__ = __len__ = __contains__ = __bool__ = _not_a_value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(
            f"{self.__name__}(...) in async code is a coroutine, not the call's result: "
            f"write `(await {self.__name__}(...)).{name}`"
        )


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
    return _invoke(name, {}, arguments, "tools.call")


def _host(op: str, arguments: dict[str, Any]) -> Any:
    if getattr(_recording, "calls", None) is not None:
        raise TypeError(f"{_LABELS[op]}() cannot be used inside a parallel() thunk")
    if _in_async_code():  # awaitable like a tool call there, and batched with them
        return _AsyncCall(op, arguments, _LABELS[op])
    return _send([(op, arguments)])[0]


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
        return _host(_SEARCH, {"query": query, "limit": limit})  # type: ignore[no-any-return]

    def describe(self, *idents: Any) -> str:
        """The typed stub (signature, types, docstring) of these tools, by identifier or
        original name; ``describe(["a", "b"])`` works too."""
        if len(idents) == 1 and isinstance(idents[0], list | tuple):
            idents = tuple(idents[0])
        if not idents or not all(type(i) is str and 0 < len(i) <= 256 for i in idents):
            raise TypeError("catalog.describe(*idents): give tool identifiers (strings)")
        if len(idents) > _MAX_DESCRIBE:
            raise ValueError(f"catalog.describe(): at most {_MAX_DESCRIBE} tools at a time")
        return _host(_DESCRIBE, {"idents": list(idents)})  # type: ignore[no-any-return]


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
def get_weather_v2(*, my_city_2, p_2fa=..., my_city=..., **extra):
    return __sdk__('get-weather.v2', {'my-city': my_city_2, '2fa': p_2fa, 'my_city': my_city}, extra)


_TOOL_NAMES = {
    'get_weather_v2': 'get-weather.v2',
}
_TOOL_IDENTS = {name: ident for ident, name in _TOOL_NAMES.items()}
tools = _Namespace('tools', (), {
    'get_weather_v2': get_weather_v2,
    'call': staticmethod(_call),
})
