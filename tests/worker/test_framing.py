"""Framing: length prefix, strict JSON decoding, the blocking reader, and hostile bytes."""

from __future__ import annotations

import socket
import struct
from typing import Any

import anyio
import pytest
from anyio.abc import UNIXSocketStream
from hypothesis import given, settings
from hypothesis import strategies as st

from worker._errors import ProtocolError, WorkerError
from worker._framing import (
    MAX_FRAME_BYTES,
    FrameDecoder,
    Validator,
    encode,
    json_problem,
    recv_frame,
)
from worker._messages import validate_child_frame, validate_host_frame

START: dict[str, Any] = {
    "type": "start",
    "code": "return 1",
    "sdk_module": "",
    "profile": "python",
    "limits": {
        "wall_seconds": 30.0,
        "cpu_seconds": 30,
        "memory_mib": 512,
        "output_bytes": 65536,
        "stream_bytes": 16777216,
        "result_bytes": 1048576,
        "max_calls": 1000,
        "max_parallel_calls": 10,
    },
}
RESULT: dict[str, Any] = {"type": "result", "id": 3, "ok": True, "value": None}
READY: dict[str, Any] = {"type": "ready", "pid": 12, "enforcement": {}}
STDOUT: dict[str, Any] = {"type": "stdout", "data": "héllo\n"}
DONE: dict[str, Any] = {"type": "done", "ok": True, "value": {"k": [1, 2.5, "s", False, None]}}


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
    frames = [READY, STDOUT, DONE]
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


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"a": [1, 2.5, None, True, "s"]}, None),
        ((1, 2), "value is a tuple, not a JSON value"),
        ({"a": [float("nan")]}, "value['a'][0] is a non-finite float"),
        ({1: "x"}, "value has a non-string key of type int"),
        ([[[1]]], None),
    ],
)
def test_json_problem_names_the_path(value: object, problem: str | None) -> None:
    assert json_problem(value) == problem


def test_json_problem_bounds_the_depth() -> None:
    assert json_problem([[[1]]], max_depth=2) == "value[0][0] is nested deeper than 2 levels"


def test_the_blocking_reader_over_a_socketpair() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(encode(START) + encode(RESULT))
        assert recv_frame(b, validate_host_frame) == START
        assert recv_frame(b, validate_host_frame) == RESULT
        a.sendall(encode(STDOUT))
        with pytest.raises(ProtocolError):  # a child frame is not a host frame
            recv_frame(b, validate_host_frame)
        a.shutdown(socket.SHUT_WR)
        assert recv_frame(b, validate_host_frame) is None


def test_the_blocking_reader_reports_a_truncated_frame() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(encode(RESULT)[:-2])
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ProtocolError, match="ended inside"):
            recv_frame(b, validate_host_frame)


async def _decode_stream(data: bytes, validate: Validator) -> list[dict[str, Any]]:
    """What the host does with a child's channel: feed the decoder until EOF, then eof()."""
    a, b = socket.socketpair()
    frames: list[dict[str, Any]] = []
    async with await UNIXSocketStream.from_socket(a) as stream:
        b.sendall(data)
        b.close()
        decoder = FrameDecoder(validate)
        while True:
            try:
                chunk = await stream.receive()
            except anyio.EndOfStream:
                decoder.eof()
                return frames
            frames += decoder.feed(chunk)


@pytest.mark.anyio
async def test_the_decoder_over_a_stream_ends_cleanly_at_a_frame_boundary() -> None:
    data = encode(READY) + encode(DONE)
    assert await _decode_stream(data, validate_child_frame) == [READY, DONE]
    assert await _decode_stream(b"", validate_child_frame) == []


@pytest.mark.anyio
async def test_the_decoder_over_a_stream_reports_a_truncated_frame() -> None:
    with pytest.raises(ProtocolError, match="ended inside"):
        await _decode_stream(encode(READY) + encode(STDOUT)[:-1], validate_child_frame)
