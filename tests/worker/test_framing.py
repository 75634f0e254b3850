"""Framing: length prefix, strict JSON decoding, the blocking reader, and hostile bytes."""

from __future__ import annotations

import json
import socket
import struct
import threading
from typing import Any

import anyio
import pytest
from anyio.abc import UNIXSocketStream
from hypothesis import given, settings
from hypothesis import strategies as st

from worker._errors import ProtocolError, WorkerError
from worker._protocol._framing import (
    MAX_FRAME_BYTES,
    MAX_FRAME_DEPTH,
    FrameDecoder,
    FrameReader,
    Validator,
    depth_problem,
    encode,
    json_problem,
    json_size,
    scrub_surrogates,
    scrub_text,
)
from worker._protocol._messages import validate_child_frame, validate_host_frame

START: dict[str, Any] = {
    "type": "start",
    "code": "return 1",
    "sdk_module": "",
    "profile": "python",
    "limits": {
        "wall_seconds": 30.0,
        "cpu_seconds": 30,
        "memory_mib": 512,
        "scratch_mib": 256,
        "output_bytes": 65536,
        "stream_bytes": 16777216,
        "result_bytes": 1048576,
        "max_calls": 1000,
        "max_parallel_calls": 10,
        "session_mib": 16,
    },
    "session": None,
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
        (b"[" * 100_000, "nested deeper than 204"),
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


def test_the_decoder_decodes_one_frame_at_a_time_when_asked() -> None:
    decoder = FrameDecoder(validate_child_frame)
    data = b"".join(encode(f) for f in [READY, STDOUT, DONE])
    decoder.push(data[:-1])
    assert decoder.buffered == len(data) - 1  # nothing decoded yet
    assert decoder.next() == READY
    assert decoder.next() == STDOUT
    assert decoder.next() is None  # the last frame is one byte short
    decoder.push(data[-1:])
    assert decoder.next() == DONE
    assert decoder.next() is None and decoder.buffered == 0


def test_a_broken_frame_met_by_next_stays_broken() -> None:
    decoder = FrameDecoder(validate_child_frame)
    decoder.push(encode(STDOUT) + struct.pack(">I", 2) + b"{}" + encode(DONE))
    assert decoder.next() == STDOUT
    with pytest.raises(ProtocolError):
        decoder.next()
    with pytest.raises(ProtocolError):
        decoder.next()  # the stream cannot be resynced: DONE is never handed out


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
        reader = FrameReader(b, validate_host_frame)
        a.sendall(encode(START) + encode(RESULT))  # two frames, one read
        assert reader.next() == START
        assert reader.next() == RESULT
        big = {**RESULT, "value": "x" * 200_000}  # over several reads
        data = encode(big) + encode(RESULT)
        a.sendall(data[:3])  # not even a whole header yet
        sender = threading.Thread(target=a.sendall, args=(data[3:],))
        sender.start()
        assert reader.next() == big
        assert reader.next() == RESULT
        sender.join()
        a.shutdown(socket.SHUT_WR)
        assert reader.next() is None


def test_the_blocking_reader_refuses_a_wrong_frame_and_stays_broken() -> None:
    a, b = socket.socketpair()
    with a, b:
        reader = FrameReader(b, validate_host_frame)
        a.sendall(encode(STDOUT) + encode(RESULT))
        with pytest.raises(ProtocolError):  # a child frame is not a host frame
            reader.next()
        with pytest.raises(ProtocolError):
            reader.next()


def test_the_blocking_reader_reports_a_truncated_frame() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(encode(RESULT)[:-2])
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ProtocolError, match="ended inside"):
            FrameReader(b, validate_host_frame).next()


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


def _nested(depth: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    return open_ * depth + close * depth


@pytest.mark.parametrize(
    ("body", "too_deep"),
    [
        (_nested(MAX_FRAME_DEPTH), False),
        (_nested(MAX_FRAME_DEPTH + 1), True),
        (b'{"a":' * 300 + b"1" + b"}" * 300, True),
        (b"[" + b"[1," * 300 + b"]" * 301, True),  # climbs without a long run of brackets
        (b'["' + b"[{" * 5000 + b'"]', False),  # brackets inside a string nest nothing
        (b'["\\\"' + b"[" * 5000 + b'"]', False),  # ... escaped quotes included
        (b"[" + b"[]," * 100_000 + b"[]]", False),  # many, but shallow
        (b"[" * 100_000, True),  # unbalanced, still refused before decoding
    ],
)
def test_depth_is_checked_on_the_raw_bytes(body: bytes, too_deep: bool) -> None:
    assert (depth_problem(body) is not None) is too_deep


def test_a_deep_frame_is_refused_before_the_decoder_recurses() -> None:
    body = b'{"type":"done","ok":true,"value":' + _nested(950) + b"}"
    with pytest.raises(ProtocolError, match="nested deeper than 204 levels"):
        FrameDecoder(validate_child_frame).feed(_raw(body))
    value: object = 1
    for _ in range(199):
        value = [value]
    frame = {"type": "done", "ok": True, "value": value}
    assert FrameDecoder(validate_child_frame).feed(encode(frame)) == [frame]


def test_json_problem_refuses_integers_python_cannot_write() -> None:
    assert json_problem(10**4000) is None
    problem = json_problem({"n": [10**5000]})
    assert problem is not None and problem.startswith("value['n'][0] is an integer with more")


def test_json_size_is_the_compact_utf8_encoding() -> None:
    assert json_size({"a": [1, "é"]}) == len('{"a":[1,"é"]}'.encode())
    assert json_size("\ud800") == 5  # a lone surrogate counts as its 3-byte replacement


def test_lone_surrogates_become_the_replacement_character() -> None:
    assert scrub_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert scrub_text("plain é") == "plain é"
    value = ["a\ud800", {"\udfff": "x\udc00", "k": [["\ud83d"]]}]
    assert scrub_surrogates(value) == ["a\ufffd", {"\ufffd": "x\ufffd", "k": [["\ufffd"]]}]
    json.dumps(value, ensure_ascii=False).encode("utf-8")
