"""The worker wire protocol: length-prefixed JSON frames and their strict validation.

A frame is a 4-byte big-endian unsigned length followed by that many bytes of UTF-8 JSON
encoding one object with a string ``"type"``. No pickle, ever: both directions treat the
other side's bytes as hostile until :func:`validate_child_frame` /
:func:`validate_host_frame` accepted them. Unknown types, unknown fields, wrong types,
NaN/Infinity, duplicate keys, bad UTF-8 and lengths over :data:`MAX_FRAME_BYTES` are all
:class:`ProtocolError`.

Child -> host: ``ready call stdout log done``; host -> child: ``start result``. Frame
*order* (ready first, nothing after done, increasing call ids) is the host's job; this
module checks each frame alone.

This module imports only the standard library at import time (the child loads it);
anyio is imported lazily by the async helpers the host uses.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from ._errors import ProtocolError
from ._types import DIMENSIONS, Limits

if TYPE_CHECKING:
    from anyio.abc import ByteSendStream
    from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = (
    "CHILD_FAILURE_KINDS",
    "MAX_FRAME_BYTES",
    "FrameDecoder",
    "ProtocolError",
    "encode",
    "json_problem",
    "read_frame",
    "recv_frame",
    "send_frame",
    "send_frame_sync",
    "validate_child_frame",
    "validate_host_frame",
)

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Largest frame body accepted in either direction (the length prefix is checked first)."""

CHILD_FAILURE_KINDS = frozenset(
    ("exception", "policy", "invalid-result", "memory-limit", "syntax")
    + ("call-limit", "output-limit")
)
"""Failure kinds a child may report in ``done``; the host decides every other kind itself."""

_HEADER = struct.Struct(">I")
_LEVELS = frozenset(("full", "partial", "none"))
_LIMIT_FIELDS = tuple(f.name for f in fields(Limits))
Frame = dict[str, Any]
Validator = Callable[[object], Frame]


# --- JSON values ----------------------------------------------------------------------

_MAX_JSON_DEPTH = 200


def json_problem(value: object, *, max_depth: int = _MAX_JSON_DEPTH) -> str | None:
    """Why ``value`` is not a plain JSON value, or ``None`` when it is.

    Exact types only (no tuples, subclasses, non-string keys or non-finite floats), so a
    value that passes serialises the same everywhere and runs no user code when dumped.
    """
    # Paths are kept as (parent, key) links and rendered only when something is wrong.
    stack: list[tuple[object, int, object]] = [(value, 0, None)]
    while stack:
        item, depth, path = stack.pop()
        kind = type(item)
        if item is None or kind is str or kind is bool or kind is int:
            continue
        if kind is float:
            if item != item or item in (_INF, -_INF):
                return f"{_render(path)} is a non-finite float"
            continue
        if depth >= max_depth:
            return f"{_render(path)} is nested deeper than {max_depth} levels"
        if kind is list:
            assert isinstance(item, list)
            stack.extend((v, depth + 1, (path, i)) for i, v in enumerate(item))
        elif kind is dict:
            assert isinstance(item, dict)
            for k, v in item.items():
                if type(k) is not str:
                    return f"{_render(path)} has a non-string key of type {type(k).__name__}"
                stack.append((v, depth + 1, (path, k)))
        else:
            return f"{_render(path)} is a {kind.__name__}, not a JSON value"
    return None


_INF = float("inf")


def _render(path: object) -> str:
    keys: list[str] = []
    while isinstance(path, tuple):
        path, key = path
        keys.append(f"[{key!r}]" if isinstance(key, str) else f"[{key}]")
    text = "value" + "".join(reversed(keys))
    return text if len(text) <= 200 else text[:200] + "..."


# --- encoding -------------------------------------------------------------------------


def encode(frame: Frame) -> bytes:
    """Serialise one frame: length prefix + compact JSON (ASCII-escaped, so never a
    surrogate encoding error). NaN/Infinity or a non-JSON value raise ``ValueError`` /
    ``TypeError``; a body over the cap raises :class:`ProtocolError`."""
    body = json.dumps(frame, allow_nan=False, separators=(",", ":")).encode("ascii")
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME_BYTES} cap")
    return _HEADER.pack(len(body)) + body


# --- decoding -------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ProtocolError(f"non-finite number {name} is not JSON")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ProtocolError("duplicate key in JSON object")
    return obj


def parse_body(body: bytes, validate: Validator) -> Frame:
    """Decode and validate one frame body (without its length prefix)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"frame is not valid UTF-8: {exc.reason}") from exc
    try:
        obj = json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=_reject_duplicates
        )
    except ProtocolError:
        raise
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError and over-long integer literals.
        raise ProtocolError(f"frame is not valid JSON: {str(exc)[:200]}") from exc
    return validate(obj)


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, get back complete validated frames.

    After a :class:`ProtocolError` the decoder stays broken (the stream cannot be resynced).
    """

    def __init__(self, validate: Validator) -> None:
        self._validate = validate
        self._buffer = bytearray()
        self._failed: ProtocolError | None = None

    def feed(self, data: bytes) -> list[Frame]:
        if self._failed is not None:
            raise self._failed
        self._buffer += data
        frames: list[Frame] = []
        try:
            while len(self._buffer) >= 4:
                (length,) = _HEADER.unpack_from(self._buffer)
                _check_length(length)
                if len(self._buffer) < 4 + length:
                    break
                body = bytes(self._buffer[4 : 4 + length])
                del self._buffer[: 4 + length]
                frames.append(parse_body(body, self._validate))
        except ProtocolError as exc:
            self._failed = exc
            raise
        return frames

    def eof(self) -> None:
        """Declare the end of the stream: a partial frame left over is a protocol error."""
        if self._buffer:
            raise ProtocolError(f"stream ended inside a frame ({len(self._buffer)} bytes left)")


def _check_length(length: int) -> None:
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame length {length} exceeds the {MAX_FRAME_BYTES} cap")


# --- blocking helpers (the child) -----------------------------------------------------


def send_frame_sync(sock: socket.socket, frame: Frame) -> None:
    sock.sendall(encode(frame))


def _recv_exactly(sock: socket.socket, n: int, *, at_boundary: bool) -> bytes | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            if got == 0 and at_boundary:
                return None
            raise ProtocolError(f"stream ended inside a frame ({got} of {n} bytes)")
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket, validate: Validator | None = None) -> Frame | None:
    """Read one host frame (validated with ``validate``, default host->child); ``None`` at
    a clean end of stream."""
    header = _recv_exactly(sock, 4, at_boundary=True)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    _check_length(length)
    body = _recv_exactly(sock, length, at_boundary=False)
    assert body is not None
    return parse_body(body, validate or validate_host_frame)


# --- async helpers (the host) ---------------------------------------------------------


async def read_frame(
    stream: BufferedByteReceiveStream, validate: Validator | None = None
) -> Frame | None:
    """Read one child frame (validated with ``validate``, default child->host); ``None``
    at a clean end of stream; :class:`ProtocolError` for anything malformed."""
    import anyio

    try:
        header = await stream.receive_exactly(4)
    except anyio.IncompleteRead:
        if stream.buffer:
            raise ProtocolError("stream ended inside a frame header") from None
        return None
    (length,) = _HEADER.unpack(header)
    _check_length(length)
    try:
        body = await stream.receive_exactly(length)
    except anyio.IncompleteRead:
        raise ProtocolError(f"stream ended inside a frame of {length} bytes") from None
    return parse_body(body, validate or validate_child_frame)


async def send_frame(stream: ByteSendStream, frame: Frame) -> None:
    await stream.send(encode(frame))


# --- validation -----------------------------------------------------------------------


def _is_int(v: object) -> bool:
    return type(v) is int


def _is_number(v: object) -> bool:
    return type(v) is int or type(v) is float


def _is_str(v: object) -> bool:
    return type(v) is str


def _is_object(v: object) -> bool:
    return type(v) is dict


def _any(v: object) -> bool:
    return True


def _fields(obj: dict[str, Any], where: str, spec: Mapping[str, Callable[[object], bool]]) -> None:
    extra = sorted(set(obj) - set(spec))
    if extra:
        raise ProtocolError(f"{where}: unknown field(s) {extra}")
    missing = sorted(set(spec) - set(obj))
    if missing:
        raise ProtocolError(f"{where}: missing field(s) {missing}")
    for name, check in spec.items():
        if not check(obj[name]):
            raise ProtocolError(f"{where}: field {name!r} has the wrong type or value")


def _check_enforcement(value: object) -> bool:
    if not _is_object(value):
        return False
    assert isinstance(value, dict)
    for dim, facts in value.items():
        if dim not in DIMENSIONS or not _is_object(facts):
            return False
        _fields(facts, f"ready.enforcement.{dim}", _ENFORCEMENT_SPEC)
        if facts["level"] not in _LEVELS:
            return False
    return True


def _check_calls(value: object) -> bool:
    if type(value) is not list or not value:
        return False
    for i, call in enumerate(value):
        if not _is_object(call):
            return False
        _fields(call, f"call.calls[{i}]", _CALL_SPEC)
        if call["id"] < 1:
            return False
    return True


def _check_record(value: object) -> bool:
    if not _is_object(value):
        return False
    assert isinstance(value, dict)
    _fields(value, "log.record", _RECORD_SPEC)
    return True


def _check_limits(value: object) -> bool:
    if not _is_object(value):
        return False
    assert isinstance(value, dict)
    _fields(value, "start.limits", {name: _is_number for name in _LIMIT_FIELDS})
    try:
        Limits(**value)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"start.limits: {exc}") from exc
    return True


_ENFORCEMENT_SPEC = {"level": _is_str, "mechanism": _is_str, "gap": _is_str}
_CALL_SPEC = {"id": _is_int, "tool": _is_str, "arguments": _is_object}
_RECORD_SPEC = {
    "name": _is_str,
    "levelno": _is_int,
    "levelname": _is_str,
    "msg": _is_str,
    "created": _is_number,
}

_DONE_OK_SPEC = {"type": _is_str, "ok": _any, "value": _any}
_DONE_FAILED_SPEC = {"type": _is_str, "ok": _any, "kind": _is_str, "detail": _is_str}
_RESULT_OK_SPEC = {"type": _is_str, "id": _is_int, "ok": _any, "value": _any}
_RESULT_FAILED_SPEC = {
    "type": _is_str,
    "id": _is_int,
    "ok": _any,
    "code": _is_str,
    "message": _is_str,
}

_CHILD_SPECS: dict[str, dict[str, Callable[[object], bool]]] = {
    "ready": {"type": _is_str, "pid": _is_int, "enforcement": _check_enforcement},
    "call": {"type": _is_str, "calls": _check_calls},
    "stdout": {"type": _is_str, "data": _is_str},
    "log": {"type": _is_str, "record": _check_record},
}
_HOST_SPECS: dict[str, dict[str, Callable[[object], bool]]] = {
    "start": {
        "type": _is_str,
        "code": _is_str,
        "sdk_module": _is_str,
        "profile": lambda v: v in ("python", "restricted"),
        "limits": _check_limits,
    },
}


def _frame_type(obj: object) -> str:
    if not _is_object(obj):
        raise ProtocolError(f"frame is a JSON {type(obj).__name__}, not an object")
    assert isinstance(obj, dict)
    kind = obj.get("type")
    if not _is_str(kind):
        raise ProtocolError("frame has no string 'type'")
    assert isinstance(kind, str)
    return kind


def validate_child_frame(obj: object) -> Frame:
    """Check one decoded child->host frame; return it or raise :class:`ProtocolError`."""
    kind = _frame_type(obj)
    assert isinstance(obj, dict)
    if kind == "done":
        if obj.get("ok") is True:
            _fields(obj, "done", _DONE_OK_SPEC)
        elif obj.get("ok") is False:
            _fields(obj, "done", _DONE_FAILED_SPEC)
            if obj["kind"] not in CHILD_FAILURE_KINDS:
                raise ProtocolError(f"done: kind {obj['kind'][:50]!r} is not a child kind")
        else:
            raise ProtocolError("done: field 'ok' must be true or false")
        return obj
    spec = _CHILD_SPECS.get(kind)
    if spec is None:
        raise ProtocolError(f"unknown child frame type {kind[:50]!r}")
    _fields(obj, kind, spec)
    return obj


def validate_host_frame(obj: object) -> Frame:
    """Check one decoded host->child frame; return it or raise :class:`ProtocolError`."""
    kind = _frame_type(obj)
    assert isinstance(obj, dict)
    if kind == "result":
        if obj.get("ok") is True:
            _fields(obj, "result", _RESULT_OK_SPEC)
        elif obj.get("ok") is False:
            _fields(obj, "result", _RESULT_FAILED_SPEC)
        else:
            raise ProtocolError("result: field 'ok' must be true or false")
        return obj
    spec = _HOST_SPECS.get(kind)
    if spec is None:
        raise ProtocolError(f"unknown host frame type {kind[:50]!r}")
    _fields(obj, kind, spec)
    return obj
