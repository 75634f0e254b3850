"""Frame schemas: one table, one validator for both directions, hostile objects."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import _strategies as strategies
from worker._errors import ProtocolError
from worker._protocol._framing import MAX_FRAME_BYTES, FrameDecoder, encode, raw_frame
from worker._protocol._messages import (
    HOST_OPERATIONS,
    MAX_DESCRIBE_IDENTS,
    MAX_SEARCH_LIMIT,
    MAX_SEARCH_QUERY_CHARS,
    SCHEMAS,
    Sender,
    validate_child_frame,
    validate_frame,
    validate_host_frame,
)
from worker._protocol._state import STATE_CHUNK_BYTES, state_frames

LIMITS = {
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
}
FULL = {"level": "full", "mechanism": "Landlock", "gap": ""}

VALID_CHILD: list[dict[str, Any]] = [
    {"type": "ready", "pid": 12, "enforcement": {"filesystem": FULL, "cpu": FULL}},
    {"type": "ready", "pid": 12, "enforcement": {}},
    {"type": "applied", "applied": True, "error": "", "cpu_limit_s": 31},
    {"type": "applied", "applied": False, "error": "rlimits off", "cpu_limit_s": 0},
    {"type": "call", "calls": [{"id": 1, "tool": "t", "arguments": {"a": [1, None]}}]},
    {"type": "call", "calls": [{"id": 1, "tool": "t", "arguments": {}}], "more": True},
    {"type": "stdout", "data": "héllo\n"},
    {
        "type": "log",
        "record": {"name": "x", "levelno": 30, "levelname": "WARNING", "msg": "m", "created": 1.5},
    },
    {"type": "done", "ok": True, "value": {"k": [1, 2.5, "s", False, None]}},
    {"type": "done", "ok": False, "kind": "exception", "detail": "Traceback"},
    {"type": "saved", "bytes": 3, "names": ["x"], "dropped": [], "problem": ""},
    {
        "type": "saved",
        "bytes": 0,
        "names": ["rows", "g"],
        "dropped": [{"name": "g", "reason": "a generator"}],
        "problem": "over Limits.session_mib",
    },
]
VALID_HOST: list[dict[str, Any]] = [
    {"type": "limits", "cpu_seconds": 2.5, "data_mib": 512, "as_mib": 1536},
    {"type": "sdk", "module": "tools = None"},
    {
        "type": "start",
        "code": "return 1",
        "sdk_module": "",
        "profile": "python",
        "limits": LIMITS,
        "session": None,
    },
    {
        "type": "start",
        "code": "x",
        "sdk_module": "",
        "profile": "restricted",
        "limits": LIMITS,
        "session": {"bytes": 12},
    },
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
    {"type": "applied", "applied": 1, "error": "", "cpu_limit_s": 1},
    {"type": "applied", "applied": True, "error": "x" * 1001, "cpu_limit_s": 1},
    {"type": "ready", "pid": True, "enforcement": {}},
    {"type": "ready", "pid": 1, "enforcement": {"gpu": FULL}},
    {"type": "ready", "pid": 1, "enforcement": {"cpu": {**FULL, "level": "most"}}},
    {"type": "call", "calls": []},
    {"type": "call", "calls": [{"id": 0, "tool": "t", "arguments": {}}]},
    {"type": "call", "calls": [{"id": 1, "tool": "t", "arguments": []}]},
    {"type": "call", "calls": [{"id": 1.0, "tool": "t", "arguments": {}}]},
    {"type": "call", "calls": [{"id": 1, "tool": "t", "arguments": {}, "token": "x"}]},
    {"type": "call", "calls": [{"id": 1, "tool": "t", "arguments": {}}], "more": 1},
    {"type": "call", "more": True},
    {"type": "stdout", "data": "x", "more": True},
    {"type": "stdout", "data": 5},
    {"type": "log", "record": {"name": "x", "levelno": 30, "levelname": "W", "msg": "m"}},
    {"type": "done", "ok": True},
    {"type": "done", "ok": 1, "value": 1},
    {"type": "done", "ok": False, "kind": "timeout", "detail": "x"},
    {"type": "done", "ok": True, "value": 1, "kind": "exception"},
    {"type": "state", "data": 5},
    {"type": "state", "data": "cHRj"},  # base64 in JSON: a state chunk is only ever raw
    b"",
    b"x" * (STATE_CHUNK_BYTES + 1),
    {"type": "saved", "bytes": -1, "names": [], "dropped": [], "problem": ""},
    {"type": "saved", "bytes": 1, "names": [1], "dropped": [], "problem": ""},
    {"type": "saved", "bytes": 1, "names": [], "dropped": [{"name": "g"}], "problem": ""},
    {"type": "saved", "bytes": 1, "names": ["n"] * 10_001, "dropped": [], "problem": ""},
    {"type": "saved", "bytes": 1, "names": [], "dropped": []},
]
INVALID_HOST: list[object] = [
    {"type": "ready", "pid": 1, "enforcement": {}},
    {"type": "sdk"},
    {"type": "limits", "cpu_seconds": 1, "data_mib": 0, "as_mib": 1},
    {"type": "limits", "cpu_seconds": "1", "data_mib": 1, "as_mib": 1},
    {"type": "sdk", "module": 1},
    {"type": "sdk", "module": "", "sdk_module": ""},
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
    {"type": "saved", "bytes": 1, "names": [], "dropped": [], "problem": ""},
    {
        "type": "start",
        "code": "",
        "sdk_module": "",
        "profile": "python",
        "limits": LIMITS,
        "session": {"bytes": -1},
    },
    {
        "type": "start",
        "code": "",
        "sdk_module": "",
        "profile": "python",
        "limits": LIMITS,
        "session": "state",
    },
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


EXAMPLES: dict[Sender, list[dict[str, Any]]] = {"child": VALID_CHILD, "host": VALID_HOST}


RAW = {"state"}
"""Frame types that travel only as raw frames (their examples are below)."""


@pytest.mark.parametrize("sender", ["child", "host"])
def test_the_examples_cover_every_frame_type_and_both_ok_variants(sender: Sender) -> None:
    examples = EXAMPLES[sender]
    assert {f["type"] for f in examples} | RAW == set(SCHEMAS[sender])
    for kind, schema in SCHEMAS[sender].items():
        if schema.failed is not None:
            assert {f["ok"] for f in examples if f["type"] == kind} == {True, False}, kind


BOTH_WAYS = {"state"}
"""A session's state crosses in both directions, in the same frames."""


@pytest.mark.parametrize("validate", [validate_child_frame, validate_host_frame])
def test_a_state_chunk_crosses_as_a_raw_frame_both_ways(validate: Any) -> None:
    blob = bytes(range(256)) * 40  # every byte value, the JSON specials included
    assert FrameDecoder(validate).feed(raw_frame(blob)) == [{"type": "state", "data": blob}]


def test_a_state_is_cut_into_chunks_within_the_cap_and_in_order() -> None:
    blob = b"".join(bytes([i]) * STATE_CHUNK_BYTES for i in (1, 2)) + b"tail"
    frames = FrameDecoder(validate_host_frame).feed(b"".join(state_frames(blob)))
    assert [len(f["data"]) for f in frames] == [STATE_CHUNK_BYTES, STATE_CHUNK_BYTES, 4]
    assert b"".join(f["data"] for f in frames) == blob
    assert list(state_frames(b"")) == []


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"\x00", "state.data: an empty chunk"),
        (b"\x00" + b"x" * (STATE_CHUNK_BYTES + 1), "over the 4194304 cap"),
        (b'{"type":"state","data":"cHRj"}', "only a raw frame carries it"),
    ],
)
def test_a_malformed_state_chunk_is_a_protocol_error(body: bytes, needle: str) -> None:
    with pytest.raises(ProtocolError) as info:
        FrameDecoder(validate_child_frame).feed(_raw(body))
    assert needle in info.value.detail


def test_a_raw_frame_over_the_frame_cap_is_refused_before_it_is_sent() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        raw_frame(b"x" * MAX_FRAME_BYTES)


@pytest.mark.parametrize(
    ("sender", "frame"),
    [("host", f) for f in VALID_CHILD if f["type"] not in BOTH_WAYS]
    + [("child", f) for f in VALID_HOST if f["type"] not in BOTH_WAYS],
)
def test_a_frame_is_valid_from_one_sender_only(sender: Sender, frame: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match=f"unknown {sender} frame type"):
        validate_frame(sender, frame)


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        ({"type": "call", "calls": [{"id": 1, "tool": 5, "arguments": {}}]}, "call.calls[0].tool"),
        (
            {"type": "ready", "pid": 1, "enforcement": {"cpu": {**FULL, "x": 1}}},
            "ready.enforcement.cpu",
        ),
        ({"type": "done", "ok": False, "kind": "timeout", "detail": ""}, "done.kind"),
        ({"type": "done", "ok": None, "value": 1}, "'ok' must be true or false"),
        ({"type": "stdout"}, "missing field(s) ['data']"),
    ],
)
def test_errors_name_the_path_of_the_bad_field(obj: object, needle: str) -> None:
    with pytest.raises(ProtocolError) as info:
        validate_child_frame(obj)
    assert needle in info.value.detail


def _raw(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


_json = strategies.json_values()


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


# --- host operations: calls under names no tool can have, their arguments checked exactly ---


def _operation(tool: str, arguments: object) -> dict[str, Any]:
    return {"type": "call", "calls": [{"id": 1, "tool": tool, "arguments": arguments}]}


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("catalog:search", {"query": "weather", "limit": 10}),
        ("catalog:search", {"query": "x" * MAX_SEARCH_QUERY_CHARS, "limit": MAX_SEARCH_LIMIT}),
        ("catalog:describe", {"idents": ["get_weather", "web-search"]}),
        ("catalog:describe", {"idents": ["t"] * MAX_DESCRIBE_IDENTS}),
    ],
)
def test_host_operations_with_their_exact_arguments_are_valid(tool: str, arguments: Any) -> None:
    frame = _operation(tool, arguments)
    assert validate_child_frame(json.loads(json.dumps(frame))) == frame


@pytest.mark.parametrize(
    ("tool", "arguments", "needle"),
    [
        ("catalog:search", {"query": "x"}, "missing field(s) ['limit']"),
        ("catalog:search", {"query": "x", "limit": 0}, "limit: must be from 1"),
        ("catalog:search", {"query": "x", "limit": True}, "limit: wrong type bool"),
        ("catalog:search", {"query": "x" * (MAX_SEARCH_QUERY_CHARS + 1), "limit": 1}, "longer"),
        ("catalog:search", {"query": "x", "limit": 1, "more": 1}, "unknown field(s) ['more']"),
        ("catalog:describe", {"idents": []}, "needs at least 1 item"),
        ("catalog:describe", {"idents": [1]}, "idents[0]: wrong type int"),
        ("catalog:describe", {"idents": ["t"] * (MAX_DESCRIBE_IDENTS + 1)}, "more than 50"),
        ("catalog:describe", {"idents": ["x" * 257]}, "longer than 256"),
        ("catalog:drop", {}, "unknown host operation 'catalog:drop'"),
        ("evil:x", {}, "unknown host operation"),
    ],
)
def test_a_malformed_host_operation_is_a_protocol_error(
    tool: str, arguments: Any, needle: str
) -> None:
    with pytest.raises(ProtocolError, match="call.calls\\[0\\]") as caught:
        validate_child_frame(_operation(tool, arguments))
    assert needle in str(caught.value)


def test_the_sdk_module_sends_what_the_protocol_accepts() -> None:
    from sdkgen import _module_runtime as runtime

    assert set(HOST_OPERATIONS) == {runtime._SEARCH, runtime._DESCRIBE}  # noqa: SLF001
    assert runtime._MAX_QUERY_CHARS == MAX_SEARCH_QUERY_CHARS  # noqa: SLF001
    assert runtime._MAX_LIMIT == MAX_SEARCH_LIMIT  # noqa: SLF001
    assert runtime._MAX_DESCRIBE == MAX_DESCRIBE_IDENTS  # noqa: SLF001


def test_an_empty_frame_is_read_as_itself_not_as_the_start_of_the_next() -> None:
    # Its length is 0: the byte after its prefix is the next frame's, never its mark.
    with pytest.raises(ProtocolError, match="not valid JSON"):
        FrameDecoder(validate_child_frame).feed(_raw(b"") + raw_frame(b"abc"))
