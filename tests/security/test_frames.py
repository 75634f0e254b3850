"""The host-side frame loop against forged and garbage bytes (no real child needed)."""

from __future__ import annotations

import json
import socket
import struct
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import worker._host._pacing
from tests.security._support import SDK, EchoStarter, echo_calls
from worker import CallBatch, CallHandler, CallReply, CallRequest, Limits, RunOutcome, RunRequest
from worker._host._cgroups import RunCgroups
from worker._host._child_handle import ChildHandle
from worker._host._runloop import RunLoop
from worker._protocol._framing import MAX_FRAME_BYTES


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


MODES = ("handler", "starter")
each_mode = pytest.mark.parametrize("mode", MODES)


async def drive(
    data: bytes,
    limits: Limits | None = None,
    mode: str = "handler",
    *,
    eof: bool = True,
    wall: float = 2.0,
    beside: Callable[[], Coroutine[Any, Any, None]] | None = None,
    handler: CallHandler | None = None,
) -> RunOutcome:
    """Feed ``data`` as everything a child sends after ``ready``, then EOF (unless not
    ``eof``); ``beside`` runs alongside until the run ends; ``handler`` answers the calls
    (else an echo of the mode's kind)."""
    host, fake_child = socket.socketpair()
    keeper_host, keeper_child = socket.socketpair()
    keeper_child.close()  # no keeper: the exit status is unknown
    child = ChildHandle(
        run=host,
        keeper=keeper_host,
        cgroups=RunCgroups(),
        scratch=tempfile.mkdtemp(prefix="ptc-run-"),
    )
    request = RunRequest(code="return 1", sdk_module=SDK, limits=limits or Limits(wall_seconds=2))
    now = time.monotonic()
    loop = RunLoop(
        request,
        on_calls=handler or (EchoStarter() if mode == "starter" else echo_calls),
        on_stdout=None,
        abort=None,
        deadline=now + wall,
        started=now,
    )

    async def feed() -> None:
        await anyio.to_thread.run_sync(fake_child.sendall, data)
        if eof:
            fake_child.shutdown(socket.SHUT_WR)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(feed)
            if beside is not None:
                tg.start_soon(beside)
            outcome = await loop.drive(child)
            tg.cancel_scope.cancel()
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
@each_mode
@pytest.mark.anyio
async def test_forged_frames_are_protocol_errors(data: bytes, needle: str, mode: str) -> None:
    out = await drive(data, mode=mode)
    assert out.kind == "protocol"
    assert needle in out.detail


@each_mode
@pytest.mark.anyio
async def test_a_well_formed_conversation_succeeds(mode: str) -> None:
    out = await drive(frame({"type": "stdout", "data": "hello\n"}) + DONE, mode=mode)
    assert out.ok and out.value == 1 and out.output.text == "hello\n"


@each_mode
@pytest.mark.anyio
async def test_the_host_counts_calls_itself(mode: str) -> None:
    calls = b"".join(
        frame({"type": "call", "calls": [{"id": i, "tool": "echo", "arguments": {}}]})
        for i in range(1, 5)
    )
    out = await drive(calls, Limits(wall_seconds=2, max_calls=3), mode)
    assert out.kind == "call-limit"


@each_mode
@pytest.mark.anyio
async def test_the_host_counts_stream_bytes_itself(mode: str) -> None:
    data = frame({"type": "stdout", "data": "x" * 5000}) * 3
    out = await drive(data, Limits(wall_seconds=2, output_bytes=100, stream_bytes=10_000), mode)
    assert out.kind == "output-limit"


@each_mode
@pytest.mark.anyio
async def test_eof_without_done_is_a_worker_exit(mode: str) -> None:
    out = await drive(frame({"type": "stdout", "data": "partial"}), mode=mode)
    assert out.kind == "worker-exit"
    assert out.output.text == "partial"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_the_host(data: bytes) -> None:
    for mode in MODES:
        out = anyio.run(drive, data, None, mode)
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
    for mode in MODES:
        out = anyio.run(drive, b"".join(frames), None, mode)
        if out.ok:
            assert frames[-1] == DONE and frames.count(DONE) == 1
        else:
            assert out.kind in ("protocol", "worker-exit")


@each_mode
@pytest.mark.anyio
async def test_calls_are_answered_by_either_kind_of_handler(mode: str) -> None:
    calls = b"".join(
        frame({"type": "call", "calls": [{"id": i, "tool": "echo", "arguments": {"i": i}}]})
        for i in range(1, 4)
    )
    out = await drive(calls + DONE, mode=mode)
    assert out.ok and out.stats.calls == 3


@each_mode
@pytest.mark.anyio
async def test_a_silent_child_ends_at_the_deadline(mode: str) -> None:
    out = await drive(frame({"type": "stdout", "data": "hi"}), mode=mode, eof=False, wall=0.3)
    assert out.kind == "timeout" and out.output.text == "hi"


@each_mode
@pytest.mark.anyio
async def test_a_flooding_child_never_starves_the_event_loop(mode: str) -> None:
    # 4 MiB of small frames: a read takes at most 64 KiB, and the loop runs other tasks
    # between reads (counted, not timed).
    flood = frame({"type": "stdout", "data": "x" * 200}) * 20_000
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            await anyio.lowlevel.checkpoint()
            ticks += 1

    limits = Limits(wall_seconds=10, output_bytes=1000, stream_bytes=8 << 20)
    out = await drive(flood + DONE, limits, mode, wall=10, beside=heartbeat)
    assert out.ok, out.detail
    assert ticks >= 20


@each_mode
@pytest.mark.anyio
async def test_call_arguments_over_the_cap_are_refused(mode: str) -> None:
    from worker._protocol._messages import MAX_CALL_ARGUMENTS_BYTES

    big = {
        "type": "call",
        "calls": [
            {"id": 1, "tool": "echo", "arguments": {"s": "x" * (MAX_CALL_ARGUMENTS_BYTES + 10)}}
        ],
    }
    out = await drive(frame(big) + DONE, Limits(wall_seconds=10), mode, wall=10)
    assert out.kind == "protocol" and "over the cap" in out.detail


_SHORT_FLOATS = st.builds(lambda m, e: f"{m}e{e}", st.integers(1, 9), st.integers(-30, 30))
_JSON_TEXT = st.recursive(
    st.one_of(
        _SHORT_FLOATS,
        st.integers(-(10**30), 10**30).map(str),
        st.text(max_size=5).map(lambda t: json.dumps(t)),
        st.sampled_from(["true", "false", "null", '"\\u00e9"', '"\\/"']),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(st.text(max_size=3), inner), max_size=5).map(
            lambda kv: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in dict(kv).items()) + "}"
        ),
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_JSON_TEXT)
def test_decoded_json_never_grows_past_the_bound_the_host_relies_on(text: str) -> None:
    # The host skips measuring the arguments of a call frame shorter than the cap divided
    # by this bound; only numbers grow when written out again (1e15 -> 1000000000000000.0).
    from worker._host._runloop import _REWRITE_GROWTH
    from worker._protocol._framing import json_size

    value = json.loads(text)
    assert json_size(value) <= _REWRITE_GROWTH * len(text.encode())
    assert json_size([1e15] * 1000) <= _REWRITE_GROWTH * len(("[" + "1e15," * 1000).encode())


class Recorder:
    """Echoes every batch, and records each batch's call ids as it came."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    async def __call__(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
        self.batches.append([c.id for c in calls])
        return await echo_calls(calls)


class RecordingStarter(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.starter = EchoStarter()

    def start(self, batch: CallBatch) -> None:
        self.batches.append([c.id for c in batch.calls])
        self.starter.start(batch)


def call_frame(ids: range, *, more: bool = False) -> bytes:
    calls = [{"id": i, "tool": "echo", "arguments": {"i": i}} for i in ids]
    return frame({"type": "call", "calls": calls, **({"more": True} if more else {})})


@each_mode
@pytest.mark.anyio
async def test_a_batch_in_several_frames_reaches_the_handler_as_one(mode: str) -> None:
    handler = RecordingStarter() if mode == "starter" else Recorder()
    data = (
        call_frame(range(1, 4), more=True)
        + frame({"type": "stdout", "data": "between\n"})  # another thread's output
        + call_frame(range(4, 6), more=True)
        + call_frame(range(6, 7))
        + call_frame(range(7, 9))
        + DONE
    )
    out = await drive(data, mode=mode, handler=handler)
    assert out.ok and out.stats.calls == 8
    assert handler.batches == [[1, 2, 3, 4, 5, 6], [7, 8]]


@each_mode
@pytest.mark.anyio
async def test_done_before_the_last_frame_of_a_batch_is_a_protocol_error(mode: str) -> None:
    out = await drive(call_frame(range(1, 3), more=True) + DONE, mode=mode)
    assert out.kind == "protocol" and "last frame of a batch" in out.detail


@each_mode
@pytest.mark.anyio
async def test_the_calls_of_a_batch_in_frames_count_against_max_calls(mode: str) -> None:
    data = call_frame(range(1, 3), more=True) + call_frame(range(3, 5), more=True) + DONE
    out = await drive(data, Limits(wall_seconds=2, max_calls=3), mode)
    assert out.kind == "call-limit"


@each_mode
@pytest.mark.anyio
async def test_the_frames_of_one_read_are_handled_in_paced_slices(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slice of no time at all: the loop runs between any two frames, even those one
    # read brought together (counted, not timed).
    monkeypatch.setattr(worker._host._pacing, "SLICE_SECONDS", 0.0)
    frames = frame({"type": "stdout", "data": "x"}) * 200  # about 8 KiB: one read
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            await anyio.lowlevel.checkpoint()
            ticks += 1

    out = await drive(frames + DONE, mode=mode, wall=10, beside=heartbeat)
    assert out.ok, out.detail
    assert ticks >= 150
