"""The wire protocol: framing, strict validation both ways, and hostile bytes."""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

import pytest
from anyio.abc import UNIXSocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from hypothesis import given, settings
from hypothesis import strategies as st

from worker._errors import ProtocolError, WorkerError
from worker._protocol import (
    MAX_FRAME_BYTES,
    FrameDecoder,
    encode,
    read_frame,
    recv_frame,
    send_frame,
    send_frame_sync,
    validate_child_frame,
    validate_host_frame,
)

LIMITS = {
    "wall_seconds": 30.0,
    "cpu_seconds": 30,
    "memory_mib": 512,
    "output_bytes": 65536,
    "stream_bytes": 16777216,
    "result_bytes": 1048576,
    "max_calls": 1000,
    "max_parallel_calls": 10,
}
FULL = {"level": "full", "mechanism": "Landlock", "gap": ""}

VALID_CHILD: list[dict[str, Any]] = [
    {"type": "ready", "pid": 12, "enforcement": {"filesystem": FULL, "cpu": FULL}},
    {"type": "ready", "pid": 12, "enforcement": {}},
    {"type": "call", "calls": [{"id": 1, "tool": "t", "arguments": {"a": [1, None]}}]},
    {"type": "stdout", "data": "héllo\n"},
    {
        "type": "log",
        "record": {"name": "x", "levelno": 30, "levelname": "WARNING", "msg": "m", "created": 1.5},
    },
    {"type": "done", "ok": True, "value": {"k": [1, 2.5, "s", False, None]}},
    {"type": "done", "ok": False, "kind": "exception", "detail": "Traceback"},
]
VALID_HOST: list[dict[str, Any]] = [
    {"type": "start", "code": "return 1", "sdk_module": "", "profile": "python", "limits": LIMITS},
    {"type": "result", "id": 3, "ok": True, "value": None},
    {"type": "result", "id": 3, "ok": False, "code": "DENIED", "message": "no"},
]

INVALID_CHILD: list[object] = [
    [],
    "ready",
    {"pid": 1},
    {"type": 5},
    {"type": "hello"},
    {"type": "start", "code": "", "sdk_module": "", "profile": "python", "limits": LIMITS},
    {"type": "ready", "pid": 1, "enforcement": {}, "extra": 1},
    {"type": "ready", "pid": True, "enforcement": {}},
    {"type": "ready", "pid": 1, "enforcement": {"gpu": FULL}},
    {"type": "ready", "pid": 1, "enforcement": {"cpu": {**FULL, "level": "most"}}},
    {"type": "call", "calls": []},
    {"type": "call", "calls": [{"id": 0, "tool": "t", "arguments": {}}]},
    {"type": "call", "calls": [{"id": 1, "tool": "t", "arguments": []}]},
    {"type": "call", "calls": [{"id": 1.0, "tool": "t", "arguments": {}}]},
    {"type": "call", "calls": [{"id": 1, "tool": "t", "arguments": {}, "token": "x"}]},
    {"type": "stdout", "data": 5},
    {"type": "log", "record": {"name": "x", "levelno": 30, "levelname": "W", "msg": "m"}},
    {"type": "done", "ok": True},
    {"type": "done", "ok": 1, "value": 1},
    {"type": "done", "ok": False, "kind": "timeout", "detail": "x"},
    {"type": "done", "ok": True, "value": 1, "kind": "exception"},
]
INVALID_HOST: list[object] = [
    {"type": "ready", "pid": 1, "enforcement": {}},
    {"type": "start", "code": "", "sdk_module": "", "profile": "js", "limits": LIMITS},
    {"type": "start", "code": "", "sdk_module": "", "profile": "python", "limits": {}},
    {
        "type": "start",
        "code": "",
        "sdk_module": "",
        "profile": "python",
        "limits": {**LIMITS, "memory_mib": 0},
    },
    {"type": "result", "id": "1", "ok": True, "value": 1},
    {"type": "result", "id": 1, "ok": False, "code": "X"},
]


@pytest.mark.parametrize("frame", VALID_CHILD)
def test_valid_child_frames_round_trip(frame: dict[str, Any]) -> None:
    assert FrameDecoder(validate_child_frame).feed(encode(frame)) == [frame]


@pytest.mark.parametrize("frame", VALID_HOST)
def test_valid_host_frames_round_trip(frame: dict[str, Any]) -> None:
    assert FrameDecoder(validate_host_frame).feed(encode(frame)) == [frame]


@pytest.mark.parametrize("obj", INVALID_CHILD)
def test_invalid_child_frames_are_protocol_errors(obj: object) -> None:
    with pytest.raises(ProtocolError):
        validate_child_frame(obj)


@pytest.mark.parametrize("obj", INVALID_HOST)
def test_invalid_host_frames_are_protocol_errors(obj: object) -> None:
    with pytest.raises(ProtocolError):
        validate_host_frame(obj)


def _raw(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'{"type":"stdout","data":NaN}', "non-finite"),
        (b'{"type":"stdout","data":"x","data":"y"}', "duplicate"),
        (b'{"type":"stdout","data":"\xff"}', "UTF-8"),
        (b'{"type":"stdout"', "JSON"),
        (b"[" * 100_000, "JSON"),
        (b'{"type":"stdout","data":' + b"9" * 10_000 + b"}", "JSON"),
    ],
)
def test_malformed_bodies_name_the_problem(body: bytes, needle: str) -> None:
    with pytest.raises(ProtocolError, match=needle):
        FrameDecoder(validate_child_frame).feed(_raw(body))


def test_oversized_length_is_rejected_before_the_body_arrives() -> None:
    decoder = FrameDecoder(validate_child_frame)
    with pytest.raises(ProtocolError, match="exceeds"):
        decoder.feed(struct.pack(">I", MAX_FRAME_BYTES + 1))
    with pytest.raises(ProtocolError):  # stays broken
        decoder.feed(encode({"type": "stdout", "data": ""}))


def test_encode_refuses_nan_and_oversized_frames() -> None:
    with pytest.raises(ValueError):
        encode({"type": "done", "ok": True, "value": float("nan")})
    with pytest.raises(ProtocolError):
        encode({"type": "stdout", "data": "x" * (MAX_FRAME_BYTES + 1)})


def test_decoder_reassembles_frames_split_at_every_byte() -> None:
    frames = VALID_CHILD
    data = b"".join(encode(f) for f in frames)
    decoder = FrameDecoder(validate_child_frame)
    out: list[dict[str, Any]] = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
    decoder.eof()
    assert out == frames


def test_eof_inside_a_frame_is_a_protocol_error() -> None:
    decoder = FrameDecoder(validate_child_frame)
    decoder.feed(encode({"type": "stdout", "data": "abc"})[:-1])
    with pytest.raises(ProtocolError, match="ended inside"):
        decoder.eof()


def test_protocol_error_is_a_worker_error() -> None:
    assert issubclass(ProtocolError, WorkerError)
    assert ProtocolError("x").detail == "x"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_only_ever_raise_protocol_error(data: bytes) -> None:
    for validate in (validate_child_frame, validate_host_frame):
        decoder = FrameDecoder(validate)
        try:
            decoder.feed(data)
            decoder.eof()
        except ProtocolError:
            pass


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_any_json_value_round_trips_in_a_done_frame(value: object) -> None:
    frame = {"type": "done", "ok": True, "value": value}
    (decoded,) = FrameDecoder(validate_child_frame).feed(encode(frame))
    assert json.dumps(decoded) == json.dumps(frame)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _json, max_size=5), st.binary(max_size=40))
def test_forged_objects_and_garbage_suffixes_only_raise_protocol_error(
    obj: dict[str, Any], garbage: bytes
) -> None:
    for kind in ("ready", "call", "stdout", "log", "done", "start", "result"):
        data = _raw(json.dumps({"type": kind, **obj}).encode()) + garbage
        for validate in (validate_child_frame, validate_host_frame):
            try:
                FrameDecoder(validate).feed(data)
            except ProtocolError:
                pass


def test_blocking_helpers_over_a_socketpair() -> None:
    a, b = socket.socketpair()
    with a, b:
        send_frame_sync(a, VALID_HOST[0])
        send_frame_sync(a, VALID_HOST[1])
        assert recv_frame(b) == VALID_HOST[0]
        assert recv_frame(b) == VALID_HOST[1]
        a.sendall(encode({"type": "stdout", "data": "x"}))
        with pytest.raises(ProtocolError):  # a child frame is not a host frame
            recv_frame(b)
        a.shutdown(socket.SHUT_WR)
        assert recv_frame(b) is None


def test_blocking_recv_reports_a_truncated_frame() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(encode(VALID_HOST[1])[:-2])
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ProtocolError, match="ended inside"):
            recv_frame(b)


@pytest.mark.anyio
async def test_async_helpers_over_a_socketpair() -> None:
    a, b = socket.socketpair()
    async with await UNIXSocketStream.from_socket(a) as host_stream:
        b.sendall(encode(VALID_CHILD[0]) + encode(VALID_CHILD[3])[:-1])
        reader = BufferedByteReceiveStream(host_stream)
        assert await read_frame(reader) == VALID_CHILD[0]
        await send_frame(host_stream, VALID_HOST[1])
        assert recv_frame(b) == VALID_HOST[1]
        b.close()
        with pytest.raises(ProtocolError, match="ended inside"):
            await read_frame(reader)


@pytest.mark.anyio
async def test_async_read_returns_none_at_a_clean_end() -> None:
    a, b = socket.socketpair()
    async with await UNIXSocketStream.from_socket(a) as host_stream:
        b.close()
        assert await read_frame(BufferedByteReceiveStream(host_stream)) is None
