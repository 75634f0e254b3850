"""The host-side frame loop against forged and garbage bytes (no real child needed)."""

from __future__ import annotations

import json
import socket
import struct
import tempfile
import time
from typing import Any

import anyio
import pytest
from anyio.abc import UNIXSocketStream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.security._support import SDK, echo_calls
from worker import Limits, RunOutcome, RunRequest
from worker._cgroups import RunCgroups
from worker._child_handle import ChildHandle
from worker._framing import MAX_FRAME_BYTES
from worker._runloop import RunLoop


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


async def drive(data: bytes, limits: Limits | None = None) -> RunOutcome:
    """Feed ``data`` as everything a child sends after ``ready``, then EOF."""
    host, fake_child = socket.socketpair()
    keeper_host, keeper_child = socket.socketpair()
    keeper_child.close()  # no keeper: the exit status is unknown
    child = ChildHandle(
        run=await UNIXSocketStream.from_socket(host),
        keeper=await UNIXSocketStream.from_socket(keeper_host),
        cgroups=RunCgroups(),
        scratch=tempfile.mkdtemp(prefix="ptc-run-"),
    )
    request = RunRequest(code="return 1", sdk_module=SDK, limits=limits or Limits(wall_seconds=2))
    now = time.monotonic()
    loop = RunLoop(
        request, on_calls=echo_calls, on_stdout=None, abort=None, deadline=now + 2, started=now
    )

    async def feed() -> None:
        await anyio.to_thread.run_sync(fake_child.sendall, data)
        fake_child.shutdown(socket.SHUT_WR)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(feed)
            outcome = await loop.drive(child)
        return loop.finish(outcome, child)
    finally:
        await child.close()
        fake_child.close()


DONE = frame({"type": "done", "ok": True, "value": 1})
CALL1 = frame({"type": "call", "calls": [{"id": 1, "tool": "echo", "arguments": {}}]})


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        pytest.param(
            frame({"type": "ready", "pid": 1, "enforcement": {}}), "ready", id="2nd-ready"
        ),
        pytest.param(CALL1 + CALL1, "id 1", id="repeated-call-id"),
        pytest.param(frame({"type": "result", "id": 1, "ok": True, "value": 1}), "", id="result"),
        pytest.param(frame({"type": "shell", "cmd": "ls"}), "", id="unknown-type"),
        pytest.param(frame({"type": "stdout", "data": "x", "extra": 1}), "", id="unknown-field"),
        pytest.param(frame({"type": "stdout", "data": 5}), "", id="wrong-type"),
        pytest.param(frame([1, 2]), "", id="non-object"),
        pytest.param(struct.pack(">I", 3) + b"\xff\xfe\xfd", "UTF-8", id="bad-utf8"),
        pytest.param(struct.pack(">I", 5) + b"{nope", "JSON", id="bad-json"),
        pytest.param(struct.pack(">I", 8) + b'{"a":NaN', "", id="nan"),
        pytest.param(struct.pack(">I", MAX_FRAME_BYTES + 1), "cap", id="oversized"),
        pytest.param(DONE + frame({"type": "stdout", "data": "late"}), "after done", id="late"),
        pytest.param(struct.pack(">I", 100) + b"{", "", id="truncated"),
    ],
)
@pytest.mark.anyio
async def test_forged_frames_are_protocol_errors(data: bytes, needle: str) -> None:
    out = await drive(data)
    assert out.kind == "protocol"
    assert needle in out.detail


@pytest.mark.anyio
async def test_a_well_formed_conversation_succeeds() -> None:
    out = await drive(frame({"type": "stdout", "data": "hello\n"}) + DONE)
    assert out.ok and out.value == 1 and out.output.text == "hello\n"


@pytest.mark.anyio
async def test_the_host_counts_calls_itself() -> None:
    calls = b"".join(
        frame({"type": "call", "calls": [{"id": i, "tool": "echo", "arguments": {}}]})
        for i in range(1, 5)
    )
    out = await drive(calls, Limits(wall_seconds=2, max_calls=3))
    assert out.kind == "call-limit"


@pytest.mark.anyio
async def test_the_host_counts_stream_bytes_itself() -> None:
    data = frame({"type": "stdout", "data": "x" * 5000}) * 3
    out = await drive(data, Limits(wall_seconds=2, output_bytes=100, stream_bytes=10_000))
    assert out.kind == "output-limit"


@pytest.mark.anyio
async def test_eof_without_done_is_a_worker_exit() -> None:
    out = await drive(frame({"type": "stdout", "data": "partial"}))
    assert out.kind == "worker-exit"
    assert out.output.text == "partial"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_the_host(data: bytes) -> None:
    out = anyio.run(drive, data)
    assert out.kind in ("protocol", "worker-exit", "call-limit", "output-limit", None)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                frame({"type": "stdout", "data": "x"}),
                frame(
                    {
                        "type": "log",
                        "record": {
                            "name": "n",
                            "levelno": 20,
                            "levelname": "INFO",
                            "msg": "m",
                            "created": 1.0,
                        },
                    }
                ),
                CALL1,
                DONE,
                frame({"type": "ready", "pid": 1, "enforcement": {}}),
            ]
        ),
        max_size=6,
    )
)
def test_arbitrary_frame_orders_end_in_a_tagged_outcome(frames: list[bytes]) -> None:
    out = anyio.run(drive, b"".join(frames))
    if out.ok:
        assert frames[-1] == DONE and frames.count(DONE) == 1
    else:
        assert out.kind in ("protocol", "worker-exit")
