"""The frames' schemas, one table for both directions, and the one validator that reads it.

Every frame is a JSON object with a string ``"type"``; :data:`SCHEMAS` maps the sender
(``"child"`` or ``"host"``) and the type to the exact set of fields, each with its check.
``done`` and ``result`` have two variants told apart by ``ok`` (``true``: a value;
``false``: why not). Unknown types, unknown or missing fields and wrong types are all
:class:`ProtocolError`, so both sides treat the other's frames as hostile until
:func:`validate_frame` accepted them.

Child -> host: ``ready applied call stdout log state saved done``; host -> child: ``limits
sdk start state result``. ``state`` frames carry a session's state in chunks of raw bytes
(``_state``): they are raw frames (``_framing``), which reach :func:`validate_frame` as
``bytes`` and are checked as ``{"type": "state", "data": <bytes>}``; a JSON frame can
never be a ``state`` frame (JSON decodes to no ``bytes``). Frame
*order* (ready first, nothing after done, increasing call ids) is the host's run loop's
job (``_runloop``); this module checks each frame alone.

A ``call`` may also name a *host operation* instead of a tool: ``catalog:search`` and
``catalog:describe`` (:data:`HOST_OPERATIONS`; ``:`` is outside every tool name), whose
arguments are checked here exactly, so the host answers them from validated data.

Used by the host on every child frame (``_run_channel``) and by the child on every host
frame (``_child._transport``), so it imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, fields
from typing import Literal, TypeAlias

from .._errors import ProtocolError
from .._types import DIMENSIONS, Limits
from ._framing import Frame
from ._state import STATE_CHUNK_BYTES

MAX_CALL_ARGUMENTS_BYTES = 4 * 1024 * 1024
"""Largest arguments of one tool call, as compact UTF-8 JSON (the child refuses bigger ones
with a ``ValueError`` in the program; the host kills a frame that carries them)."""
MAX_LOG_MESSAGE_CHARS = 64 * 1024
"""Longest message of one ``log`` record (the child cuts longer ones around a marker)."""
MAX_LOG_NAME_CHARS = 256
"""Longest logger or level name in a ``log`` record."""
MAX_DONE_DETAIL_CHARS = 32 * 1024
"""Longest failure detail in ``done`` (the child caps its own at half of this)."""
MAX_SAVED_NAMES = 10_000
"""Most names (carried or dropped) one ``saved`` frame lists."""
MAX_SAVED_NAME_CHARS = 1024
"""Longest name in ``saved`` (a global's, or ``file <path>``)."""
MAX_SAVED_TEXT_CHARS = 4096
"""Longest reason or problem in ``saved``."""
CALLS_PER_FRAME = 256
"""Most calls the child puts in one ``call`` frame: a larger batch spans several (``more``),
so the host decodes and checks a batch of any size in pieces of bounded work."""

CHILD_FAILURE_KINDS = frozenset(
    ("exception", "policy", "invalid-result", "memory-limit", "syntax")
    + ("call-limit", "output-limit")
)
"""Failure kinds a child may report in ``done``; the host decides every other kind itself."""

Sender: TypeAlias = Literal["child", "host"]

Check: TypeAlias = Callable[[object], None]
"""Checks one value; raises :class:`_Mismatch` when it does not fit."""


class _Mismatch(Exception):
    """A value that does not fit; containers add where it sits as the error passes up
    (so the path, e.g. ``call.calls[0].id``, costs nothing while frames are valid)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []

    def at(self, segment: str) -> _Mismatch:
        self.path.append(segment)
        return self


# --- checks, and the combinators the table is written in ------------------------------


def _exact(*types: type) -> Check:
    """A value of exactly one of ``types`` (``True`` is not an ``int`` here)."""

    def check(value: object) -> None:
        if type(value) not in types:
            raise _Mismatch(f"wrong type {type(value).__name__}")

    return check


_INT = _exact(int)
_BOOL = _exact(bool)
_STR = _exact(str)
_NUMBER = _exact(int, float)
_OBJECT = _exact(dict)
_LIST = _exact(list)


def _any(value: object) -> None:
    """Any JSON value (the framing already refused everything that is not JSON)."""


def _one_of(*values: str) -> Check:
    def check(value: object) -> None:
        if type(value) is not str or value not in values:
            raise _Mismatch(f"must be one of {sorted(values)}")

    return check


def _text(max_chars: int) -> Check:
    """A string of at most ``max_chars`` characters."""

    def check(value: object) -> None:
        _STR(value)
        assert isinstance(value, str)
        if len(value) > max_chars:
            raise _Mismatch(f"longer than {max_chars} characters ({len(value)})")

    return check


def _chunk(max_bytes: int) -> Check:
    """``bytes`` (a raw frame's), not empty, at most ``max_bytes`` long."""

    def check(value: object) -> None:
        if type(value) is not bytes:
            raise _Mismatch(f"wrong type {type(value).__name__} (only a raw frame carries it)")
        if not value:
            raise _Mismatch("an empty chunk")
        if len(value) > max_bytes:
            raise _Mismatch(f"a chunk of {len(value)} bytes, over the {max_bytes} cap")

    return check


def _natural(value: object) -> None:
    _INT(value)
    assert isinstance(value, int)
    if value < 0:
        raise _Mismatch("must be at least 0")


def _optional(check: Check) -> Check:
    """``null`` or a value passing ``check``."""

    def optional(value: object) -> None:
        if value is not None:
            check(value)

    return optional


def _positive_int(value: object) -> None:
    _INT(value)
    assert isinstance(value, int)
    if value < 1:
        raise _Mismatch("must be at least 1")


def _record(spec: Mapping[str, Check], optional: Mapping[str, Check] | None = None) -> Check:
    """An object with exactly the fields of ``spec`` (and any of ``optional``), each
    passing its check."""
    names = frozenset(spec)
    allowed = names | frozenset(optional or {})
    checks = tuple(spec.items())
    optional_checks = tuple((optional or {}).items())

    def check(value: object) -> None:
        _OBJECT(value)
        assert isinstance(value, dict)
        present = checks
        if value.keys() != names:
            extra = sorted(set(value) - allowed)
            if extra:
                raise _Mismatch(f"unknown field(s) {extra}")
            if not names <= value.keys():
                raise _Mismatch(f"missing field(s) {sorted(names - set(value))}")
            present = checks + tuple((n, c) for n, c in optional_checks if n in value)
        for name, field_check in present:
            try:
                field_check(value[name])
            except _Mismatch as exc:
                raise exc.at(f".{name}") from None

    return check


def _list_of(item: Check, *, min_items: int = 0, max_items: int | None = None) -> Check:
    def check(value: object) -> None:
        _LIST(value)
        assert isinstance(value, list)
        if len(value) < min_items:
            raise _Mismatch(f"needs at least {min_items} item(s)")
        if max_items is not None and len(value) > max_items:
            raise _Mismatch(f"has more than {max_items} items")
        for i, element in enumerate(value):
            try:
                item(element)
            except _Mismatch as exc:
                raise exc.at(f"[{i}]") from None

    return check


def _map_of(keys: Collection[str], value_check: Check) -> Check:
    """An object whose keys are some of ``keys``, every value passing ``value_check``."""

    def check(value: object) -> None:
        _OBJECT(value)
        assert isinstance(value, dict)
        for key, item in value.items():
            if key not in keys:
                raise _Mismatch(f"unknown key {key[:50]!r}")
            try:
                value_check(item)
            except _Mismatch as exc:
                raise exc.at(f".{key}") from None

    return check


_LIMIT_NUMBERS = _record({f.name: _NUMBER for f in fields(Limits)})


def _limits(value: object) -> None:
    """Every ``Limits`` field, each a number, and together values ``Limits`` accepts."""
    _LIMIT_NUMBERS(value)
    assert isinstance(value, dict)
    try:
        Limits(**value)
    except (TypeError, ValueError) as exc:
        raise _Mismatch(str(exc)) from exc


# --- the table ------------------------------------------------------------------------


@dataclass(frozen=True)
class FrameSchema:
    """The fields of one frame type besides ``type``: one set, or two told apart by ``ok``."""

    fields: Mapping[str, Check]
    failed: Mapping[str, Check] | None = None
    """When set, the frame carries ``ok``: ``true`` adds :attr:`fields`, ``false`` these."""
    optional: Mapping[str, Check] | None = None
    """Fields the frame may carry besides :attr:`fields`."""


_ENFORCEMENT = _record(
    {"level": _one_of("full", "partial", "none"), "mechanism": _STR, "gap": _STR}
)
HOST_OPERATION_MARK = ":"
"""A call whose tool name contains this is a host operation (no tool name can)."""
MAX_SEARCH_QUERY_CHARS = 1000
MAX_SEARCH_LIMIT = 50
MAX_DESCRIBE_IDENTS = 50
MAX_DESCRIBE_IDENT_CHARS = 256


def _int_range(low: int, high: int) -> Check:
    def check(value: object) -> None:
        _INT(value)
        assert isinstance(value, int)
        if not low <= value <= high:
            raise _Mismatch(f"must be from {low} to {high}")

    return check


HOST_OPERATIONS: Mapping[str, Check] = {
    "catalog:search": _record(
        {"query": _text(MAX_SEARCH_QUERY_CHARS), "limit": _int_range(1, MAX_SEARCH_LIMIT)}
    ),
    "catalog:describe": _record({"idents": _list_of(_text(MAX_DESCRIBE_IDENT_CHARS), min_items=1)}),
}
"""Host operation -> the check of its arguments (``catalog.search`` / ``catalog.describe``)."""


def _call_entry(value: object) -> None:
    """One call of a ``call`` frame: a tool's (any JSON object of arguments) or a host
    operation's (exactly its arguments)."""
    _CALL_FIELDS(value)
    assert isinstance(value, dict)
    tool = value["tool"]
    if HOST_OPERATION_MARK not in tool:
        return
    check = HOST_OPERATIONS.get(tool)
    if check is None:
        raise _Mismatch(f"unknown host operation {tool[:50]!r}").at(".tool")
    try:
        check(value["arguments"])
    except _Mismatch as exc:
        raise exc.at(".arguments") from None
    if tool == "catalog:describe" and len(value["arguments"]["idents"]) > MAX_DESCRIBE_IDENTS:
        raise _Mismatch(f"more than {MAX_DESCRIBE_IDENTS} idents").at(".arguments.idents")


_CALL_FIELDS = _record({"id": _positive_int, "tool": _STR, "arguments": _OBJECT})
_LOG_NAME = _text(MAX_LOG_NAME_CHARS)
_LOG_RECORD = _record(
    {
        "name": _LOG_NAME,
        "levelno": _INT,
        "levelname": _LOG_NAME,
        "msg": _text(MAX_LOG_MESSAGE_CHARS),
        "created": _NUMBER,
    }
)

_SAVED_NAME = _text(MAX_SAVED_NAME_CHARS)
_SAVED = {
    "bytes": _natural,
    "names": _list_of(_SAVED_NAME, max_items=MAX_SAVED_NAMES),
    "dropped": _list_of(
        _record({"name": _SAVED_NAME, "reason": _text(MAX_SAVED_TEXT_CHARS)}),
        max_items=MAX_SAVED_NAMES,
    ),
    "problem": _text(MAX_SAVED_TEXT_CHARS),
}
_STATE = FrameSchema({"data": _chunk(STATE_CHUNK_BYTES)})

SCHEMAS: Mapping[Sender, Mapping[str, FrameSchema]] = {
    "child": {
        "ready": FrameSchema({"pid": _INT, "enforcement": _map_of(DIMENSIONS, _ENFORCEMENT)}),
        # The rlimits the child set itself, before any program (the answer to ``limits``).
        "applied": FrameSchema({"applied": _BOOL, "error": _text(1000), "cpu_limit_s": _NUMBER}),
        # A batch over CALLS_PER_FRAME calls spans several frames: all but its last say
        # ``more`` (true), and the host starts the batch once its last frame is in.
        "call": FrameSchema(
            {"calls": _list_of(_call_entry, min_items=1)}, optional={"more": _exact(bool)}
        ),
        "stdout": FrameSchema({"data": _STR}),
        "log": FrameSchema({"record": _LOG_RECORD}),
        "state": _STATE,
        "saved": FrameSchema(_SAVED),
        "done": FrameSchema(
            {"value": _any},
            failed={"kind": _one_of(*CHILD_FAILURE_KINDS), "detail": _text(MAX_DONE_DETAIL_CHARS)},
        ),
    },
    "host": {
        # The run's rlimits (RLIMIT_CPU soft from the child's clock, RLIMIT_DATA, RLIMIT_AS),
        # sent at most once, before ``sdk`` and ``start``.
        "limits": FrameSchema(
            {"cpu_seconds": _NUMBER, "data_mib": _positive_int, "as_mib": _positive_int}
        ),
        "sdk": FrameSchema({"module": _STR}),
        "start": FrameSchema(
            {
                "code": _STR,
                "sdk_module": _STR,
                "profile": _one_of("python", "restricted"),
                "limits": _limits,
                "session": _optional(_record({"bytes": _natural})),
            }
        ),
        "state": _STATE,
        "result": FrameSchema(
            {"id": _INT, "value": _any},
            failed={"id": _INT, "code": _STR, "message": _STR},
        ),
    },
}
"""Sender -> frame type -> schema. The only description of the frames' fields."""


# --- the validator --------------------------------------------------------------------


def _frame_check(schema: FrameSchema, ok: bool) -> Check:
    if schema.failed is None:
        return _record({"type": _STR, **schema.fields}, schema.optional)
    fields = schema.fields if ok else schema.failed
    return _record({"type": _STR, "ok": _any, **fields}, schema.optional)


# Built once: (sender, type, ok) -> the check of the whole frame.
_FRAME_CHECKS: dict[tuple[Sender, str, bool], Check] = {
    (sender, kind, ok): _frame_check(schema, ok)
    for sender, schemas in SCHEMAS.items()
    for kind, schema in schemas.items()
    for ok in (True, False)
}


def validate_frame(sender: Sender, obj: object) -> Frame:
    """Check one decoded frame from ``sender`` against :data:`SCHEMAS`; return it or raise
    :class:`ProtocolError`."""
    if type(obj) is bytes:  # a raw frame: only a state chunk is one
        obj = {"type": "state", "data": obj}
    if type(obj) is not dict:
        raise ProtocolError(f"frame is a JSON {type(obj).__name__}, not an object")
    kind = obj.get("type")
    if type(kind) is not str:
        raise ProtocolError("frame has no string 'type'")
    schema = SCHEMAS[sender].get(kind)
    if schema is None:
        raise ProtocolError(f"unknown {sender} frame type {kind[:50]!r}")
    ok: object = True
    if schema.failed is not None:
        ok = obj.get("ok")
        if ok is not True and ok is not False:
            raise ProtocolError(f"{kind}: field 'ok' must be true or false")
    try:
        _FRAME_CHECKS[sender, kind, ok is True](obj)
    except _Mismatch as exc:
        raise ProtocolError(f"{kind}{''.join(reversed(exc.path))}: {exc.message}") from exc
    return obj


def validate_child_frame(obj: object) -> Frame:
    """:func:`validate_frame` for frames the child sends (the host's decoder uses it)."""
    return validate_frame("child", obj)


def validate_host_frame(obj: object) -> Frame:
    """:func:`validate_frame` for frames the host sends (the child's reader uses it)."""
    return validate_frame("host", obj)
