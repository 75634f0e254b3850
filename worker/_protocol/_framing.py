"""Framing: length-prefixed JSON frames, raw frames, and what counts as a plain JSON value.

A frame is a 4-byte big-endian unsigned length followed by that many bytes of UTF-8 JSON
encoding one object. No pickle, ever. Decoding refuses NaN/Infinity, duplicate keys, bad
UTF-8 and lengths over :data:`MAX_FRAME_BYTES` with :class:`ProtocolError`, then hands the
object to a validator (the message schemas live in ``_messages``; this module does not
know them).

A *raw* frame is a body that starts with the byte :data:`RAW_MARK` (``0x00``, which no
JSON text starts with): the rest of the body is opaque bytes, handed to the validator as a
``bytes`` object (which JSON never decodes to, so the validator tells them apart). It
carries what is binary already (a session's state, ``_state``), which as base64 inside
JSON cost the host and the child ~20 ms a MiB to encode, check, scan and decode.

Who uses what: the host decodes child frames with :class:`FrameDecoder` (``_run_channel``)
and sends with :func:`encode` (``_runloop``); the child sends with :func:`encode` and reads
with the blocking :class:`FrameReader` (``_child._transport``); :func:`json_problem` checks
program results and call arguments in the child and in the in-process fake backend.
Standard library only: the child imports it.
"""

from __future__ import annotations

import json
import re
import socket
import struct
from collections.abc import Callable, Coroutine
from typing import Any

from .._errors import ProtocolError
from ._json_bytes import nesting_problem

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Largest frame body accepted in either direction (the length prefix is checked first)."""

Frame = dict[str, Any]
Validator = Callable[[object], Frame]
"""Checks one decoded JSON object and returns it as a frame, or raises ``ProtocolError``."""

RAW_MARK = b"\x00"
"""The first byte of a raw frame's body."""

MAX_JSON_DEPTH = 200
"""How deep a JSON value (a result, call arguments) may nest: containers within containers."""
MAX_FRAME_DEPTH = MAX_JSON_DEPTH + 4
"""How deep a whole frame body may nest: a value plus the envelope around it (a call's
arguments sit inside ``{"calls": [{"arguments": ...}]}``). Checked on the raw bytes before
``json.loads``, so decoding never recurses deeper than this."""

_HEADER = struct.Struct(">I")
_INF = float("inf")
# Python refuses int <-> str conversions of more than 4300 digits (sys.int_info); a bound on
# the bit length finds the candidates without converting anything.
_BIG_INT_BITS = 14_000
_SURROGATE = re.compile("[\ud800-\udfff]")


# --- JSON values ----------------------------------------------------------------------


def json_problem(value: object, *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why ``value`` is not a plain JSON value, or ``None`` when it is.

    Exact types only (no tuples, subclasses, non-string keys or non-finite floats), so a
    value that passes serialises the same everywhere and runs no user code when dumped;
    integers only as long as Python can write them (4300 digits); nesting bounded.
    """
    # Paths are kept as (parent, key) links and rendered only when something is wrong.
    stack: list[tuple[object, int, object]] = [(value, 0, None)]
    while stack:
        item, depth, path = stack.pop()
        kind = type(item)
        if item is None or kind is str or kind is bool:
            continue
        if kind is int:
            assert isinstance(item, int)
            if item.bit_length() > _BIG_INT_BITS and _too_many_digits(item):
                return (
                    f"{_render(path)} is an integer with more digits than Python writes as "
                    "JSON (sys.get_int_max_str_digits()); return it as a string or smaller"
                )
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
        elif isinstance(item, Coroutine):  # an SDK call (or `async def`) in async code
            name = coroutine_name(item)
            return (
                f"{_render(path)} is the coroutine {name}(...), never awaited: "
                f"write `await {name}(...)`"
            )
        else:
            return f"{_render(path)} is a {kind.__name__}, not a JSON value"
    return None


def coroutine_name(value: object) -> str:
    """What a program calls the coroutine ``value`` (``tools.search``, ``main``), read
    defensively: it is the program's own object, and its attributes may do anything."""
    try:
        name = getattr(value, "__qualname__", "")
    except Exception:  # noqa: BLE001
        name = ""
    return name if type(name) is str and 0 < len(name) <= 100 else type(value).__name__


def _too_many_digits(number: int) -> bool:
    try:
        str(number)
    except ValueError:
        return True
    return False


def json_size(value: object) -> int:
    """The size in bytes of ``value`` as compact UTF-8 JSON (a lone surrogate counts as the
    three bytes of its replacement). ``value`` must have passed :func:`json_problem`."""
    text = _SIZE_ENCODER.encode(value)
    return len(text.encode("utf-8", "surrogatepass"))


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def scrub_text(text: str) -> str:
    """``text`` with every surrogate code point (never valid UTF-8 on its own) replaced by
    U+FFFD, the replacement character."""
    return _SURROGATE.sub("\ufffd", text) if _has_surrogate(text) else text


def scrub_surrogates(value: Any) -> Any:
    """``value`` with :func:`scrub_text` applied to every string in it, keys included.

    Lists and dicts are fixed in place (callers pass values they own: a decoded frame, a
    finished program's result); a string is returned fixed. Iterative, so nesting costs no
    stack; ``value`` must have passed :func:`json_problem`."""
    if type(value) is str:
        return scrub_text(value)
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if type(item) is list:
            for i, element in enumerate(item):
                if type(element) is str:
                    if _has_surrogate(element):
                        item[i] = scrub_text(element)
                elif type(element) is list or type(element) is dict:
                    todo.append(element)
        elif type(item) is dict:
            if any(_has_surrogate(key) for key in item):
                pairs = [(scrub_text(k), v) for k, v in item.items()]
                item.clear()
                item.update(pairs)
            for key, element in item.items():
                if type(element) is str:
                    if _has_surrogate(element):
                        item[key] = scrub_text(element)
                elif type(element) is list or type(element) is dict:
                    todo.append(element)
    return value


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
    return prefixed(WIRE_ENCODER.encode(frame).encode("ascii"))


def prefixed(body: bytes) -> bytes:
    """A frame of ``body`` (a frame's JSON text, ASCII): its length prefix, then it;
    :class:`ProtocolError` over the cap."""
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME_BYTES} cap")
    return _HEADER.pack(len(body)) + body


def raw_frame(data: bytes | memoryview) -> bytes:
    """A raw frame of ``data`` (opaque bytes); :class:`ProtocolError` over the cap."""
    length = len(data) + len(RAW_MARK)
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES} cap")
    return b"".join((_HEADER.pack(length), RAW_MARK, data))


# --- decoding -------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ProtocolError(f"non-finite number {name} is not JSON")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ProtocolError("duplicate key in JSON object")
    return obj


# Made once: json.dumps/json.loads with options build a new encoder/decoder every call.
WIRE_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
"""The one JSON encoder of the worker's wires (frames, supervisor lines): compact, ASCII,
NaN and Infinity refused (``ValueError``)."""
_SIZE_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
WIRE_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant, object_pairs_hook=_reject_duplicates
)
"""The one JSON decoder of the worker's wires: NaN, Infinity and duplicate keys are a
:class:`ProtocolError`."""


def depth_problem(body: bytes, limit: int = MAX_FRAME_DEPTH) -> str | None:
    """Why the frame body ``body`` nests deeper than ``limit``, or ``None``; on the raw
    bytes, without decoding (so a hostile frame cannot make the decoder recurse)."""
    problem = nesting_problem(body, limit)
    return None if problem is None else f"frame is {problem}"


def parse_body(body: bytes, validate: Validator) -> Frame:
    """Decode and validate one JSON frame body (without its length prefix)."""
    problem = depth_problem(body)
    if problem is not None:
        raise ProtocolError(problem)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"frame is not valid UTF-8: {exc.reason}") from exc
    try:
        obj = WIRE_DECODER.decode(text)
    except ProtocolError:
        raise
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError and over-long integer literals.
        raise ProtocolError(f"frame is not valid JSON: {str(exc)[:200]}") from exc
    return validate(obj)


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, get back complete validated frames
    (all at once with :meth:`feed`, or one at a time: :meth:`push`, then :meth:`next`).

    After a :class:`ProtocolError` the decoder stays broken (the stream cannot be resynced).
    """

    def __init__(self, validate: Validator) -> None:
        self._validate = validate
        self._buffer = bytearray()
        self._failed: ProtocolError | None = None

    @property
    def failed(self) -> ProtocolError | None:
        """The error that broke the stream, if one did (it is raised again on every feed)."""
        return self._failed

    @property
    def buffered(self) -> int:
        """Bytes buffered and not decoded yet (every frame decoded after the next
        :meth:`push` or :meth:`feed` is at most this plus that call's bytes long)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        """Buffer ``data`` and decode every frame the buffer now completes."""
        self.push(data)
        frames: list[Frame] = []
        while (frame := self.next()) is not None:
            frames.append(frame)
        return frames

    def push(self, data: bytes) -> None:
        """Buffer ``data`` without decoding anything (:meth:`next` decodes, one at a time)."""
        if self._failed is not None:
            raise self._failed
        self._buffer += data

    def next(self) -> Frame | None:
        """The next complete frame in the buffer, decoded and validated; ``None`` until
        more bytes complete one."""
        if self._failed is not None:
            raise self._failed
        buffer = self._buffer
        if len(buffer) < 4:
            return None
        try:
            (length,) = _HEADER.unpack_from(buffer)
            _check_length(length)
            if len(buffer) < 4 + length:
                return None
            if length and buffer[4] == RAW_MARK[0]:  # a raw frame: its bytes, copied once
                data = bytes(buffer[5 : 4 + length])
                del buffer[: 4 + length]
                return self._validate(data)
            body = bytes(buffer[4 : 4 + length])
            del buffer[: 4 + length]
            return parse_body(body, self._validate)
        except ProtocolError as exc:
            self._failed = exc
            raise

    def eof(self) -> None:
        """Declare the end of the stream: a partial frame left over is a protocol error."""
        if self._buffer:
            raise ProtocolError(f"stream ended inside a frame ({len(self._buffer)} bytes left)")


def _check_length(length: int) -> None:
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame length {length} exceeds the {MAX_FRAME_BYTES} cap")


# --- blocking read (the child) --------------------------------------------------------

_READ_BYTES = 65536


class FrameReader:
    """Frames from a blocking socket, read in chunks: a small frame costs one ``recv``
    (header and body together), and bytes past a frame wait for the next read.

    :meth:`next` returns the next validated frame, ``None`` at a clean end of stream, and
    raises :class:`ProtocolError` for anything malformed or truncated (after which the
    reader stays broken, like :class:`FrameDecoder`)."""

    def __init__(self, sock: socket.socket, validate: Validator) -> None:
        self._sock = sock
        self._decoder = FrameDecoder(validate)
        self._frames: list[Frame] = []

    def next(self) -> Frame | None:
        if self._decoder.failed is not None:  # no read past a broken frame
            raise self._decoder.failed
        while not self._frames:
            data = self._sock.recv(_READ_BYTES)
            if not data:
                self._decoder.eof()
                return None
            self._frames = self._decoder.feed(data)
            self._frames.reverse()  # popped from the end, in order
        return self._frames.pop()
