"""Framing: length-prefixed JSON frames, and what counts as a plain JSON value.

A frame is a 4-byte big-endian unsigned length followed by that many bytes of UTF-8 JSON
encoding one object. No pickle, ever. Decoding refuses NaN/Infinity, duplicate keys, bad
UTF-8 and lengths over :data:`MAX_FRAME_BYTES` with :class:`ProtocolError`, then hands the
object to a validator (the message schemas live in ``_messages``; this module does not
know them).

Who uses what: the host decodes child frames with :class:`FrameDecoder` (``_child_handle``)
and sends with :func:`encode` (``_runloop``); the child sends with :func:`encode` and reads
with the blocking :func:`recv_frame` (``_child._transport``); :func:`json_problem` checks
program results and call arguments in the child and in the in-process fake backend.
Standard library only: the child imports it.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from typing import Any

from ._errors import ProtocolError

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Largest frame body accepted in either direction (the length prefix is checked first)."""

Frame = dict[str, Any]
Validator = Callable[[object], Frame]
"""Checks one decoded JSON object and returns it as a frame, or raises ``ProtocolError``."""

_HEADER = struct.Struct(">I")
_MAX_JSON_DEPTH = 200
_INF = float("inf")


# --- JSON values ----------------------------------------------------------------------


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


# --- blocking read (the child) --------------------------------------------------------


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


def recv_frame(sock: socket.socket, validate: Validator) -> Frame | None:
    """Read one frame from a blocking socket, checked with ``validate``; ``None`` at a clean
    end of stream; :class:`ProtocolError` for anything malformed or truncated."""
    header = _recv_exactly(sock, 4, at_boundary=True)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    _check_length(length)
    body = _recv_exactly(sock, length, at_boundary=False)
    assert body is not None
    return parse_body(body, validate)
