"""The host's handle on one child, against fake supervisor-line and run sockets (no zygote)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import pytest

import worker._host._child_handle
from worker._errors import StartFailed, WorkerError
from worker._host._cgroups import RunCgroups
from worker._host._child_handle import ChildHandle
from worker._protocol._framing import encode
from worker._protocol._keeper_lines import ExitReport, Hello, Killed, SetupFailed, SpawnFailed

pytestmark = pytest.mark.anyio

DEADLOCK_GUARD_S = 30
"""Only turns a close that waits for ever into a failure (never a timing bound)."""


@dataclass
class Fake:
    handle: ChildHandle
    run: socket.socket
    """The child's end of the run channel."""
    keeper: socket.socket
    """The zygote's end of the child's supervisor line."""


@pytest.fixture
async def fake() -> AsyncIterator[Fake]:
    run_host, run_child = socket.socketpair()
    keep_host, keep_child = socket.socketpair()
    handle = ChildHandle(
        run=run_host,
        keeper=keep_host,
        cgroups=RunCgroups(),
        scratch=tempfile.mkdtemp(prefix="ptc-run-"),
    )
    with run_child, keep_child:
        yield Fake(handle, run_child, keep_child)
        keep_child.close()  # the line's EOF: close() need not wait for a report
        await handle.close()


@pytest.mark.parametrize(
    ("keeper_says", "needle"),
    [
        (
            SpawnFailed(error="fork failed: EAGAIN").to_line(),
            "could not start a child: fork failed",
        ),
        (b"garbage\n", "not JSON"),
        (b"", "the zygote is gone"),
        (
            ExitReport(status=0, cpu_ms=0.0, maxrss_kib=0).to_line(),
            "it died before it said hello",
        ),
    ],
)
async def test_a_failed_handshake_is_a_worker_error_and_closes(
    fake: Fake, keeper_says: bytes, needle: str
) -> None:
    fake.keeper.sendall(keeper_says)
    fake.keeper.shutdown(socket.SHUT_WR)
    with pytest.raises(WorkerError, match=needle):
        await fake.handle.handshake(2.0)
    assert fake.handle.closed and not fake.handle.ready


@pytest.mark.parametrize(
    ("err", "lasting"),
    [(1, True), (11, False)],
    ids=["EPERM-lasts", "EAGAIN-passes"],
)
async def test_a_child_that_dies_setting_up_names_its_step(
    fake: Fake, stand_in: subprocess.Popen[bytes], err: int, lasting: bool
) -> None:
    fake.keeper.sendall(Hello(keeper_pid=0, child_pid=stand_in.pid).to_line())
    line = SetupFailed(step="enter the scratch dir /x", error="[Errno 2] nope", errno=err)
    fake.keeper.sendall(line.to_line())
    fake.keeper.sendall(ExitReport(status=71 << 8, cpu_ms=1.0, maxrss_kib=1).to_line())
    fake.run.close()  # EOF on the run channel: no ready
    with pytest.raises(StartFailed) as caught:
        await fake.handle.handshake(60.0)
    assert str(caught.value) == (
        "could not start a child: the child could not enter the scratch dir /x: [Errno 2] nope"
    )
    assert caught.value.lasting is lasting


@pytest.fixture
def stand_in() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for the child, so the handle has a real pid to open and kill."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


async def test_a_handshake_reads_hello_then_ready(
    fake: Fake, stand_in: subprocess.Popen[bytes]
) -> None:
    fake.keeper.sendall(Hello(keeper_pid=0, child_pid=stand_in.pid).to_line())
    full = {"level": "full", "mechanism": "Landlock", "gap": ""}
    fake.run.sendall(encode({"type": "ready", "pid": 1, "enforcement": {"filesystem": full}}))
    await fake.handle.handshake(5.0)
    assert fake.handle.ready and fake.handle.pid == stand_in.pid
    assert fake.handle.enforcement["filesystem"].level == "full"
    fake.keeper.close()  # no exit report: close() still kills through the pidfd
    await fake.handle.close()
    assert await anyio.to_thread.run_sync(stand_in.wait) == -9


async def test_the_child_sets_its_limits_on_itself_and_says_what_it_set(fake: Fake) -> None:
    fake.run.sendall(encode({"type": "applied", "applied": True, "error": "", "cpu_limit_s": 7}))
    why = await fake.handle.apply_limits(cpu_seconds=5, data_mib=64, as_mib=1088)
    assert why == "" and fake.handle.cpu_limit_s == 7.0
    sent = fake.run.recv(200)
    assert sent[4:] == b'{"type":"limits","cpu_seconds":5,"data_mib":64,"as_mib":1088}'


@pytest.mark.parametrize(
    ("child_says", "why"),
    [
        (b"", "the child exited"),
        (encode({"type": "stdout", "data": "x"}), "the child sent 'stdout'"),
        (
            encode({"type": "applied", "applied": False, "error": "EPERM", "cpu_limit_s": 0}),
            "EPERM",
        ),
    ],
)
async def test_limits_not_applied_say_why_and_never_raise(
    fake: Fake, child_says: bytes, why: str
) -> None:
    fake.run.sendall(child_says)
    fake.run.shutdown(socket.SHUT_WR)
    assert why in await fake.handle.apply_limits(cpu_seconds=5, data_mib=64, as_mib=1088)
    assert fake.handle.cpu_limit_s == 0.0


async def test_what_the_line_says_is_kept(fake: Fake) -> None:
    report = ExitReport(status=9, cpu_ms=3.5, maxrss_kib=100, cpu_clock_s=1.25)
    fake.keeper.sendall(Killed(reason="more than 65536 files").to_line())
    fake.keeper.sendall(report.to_line())
    assert await fake.handle.keeper.wait_exit() == report
    assert fake.handle.keeper.exit == report
    assert fake.handle.keeper.killed == "more than 65536 files"


async def test_a_line_that_breaks_its_protocol_is_a_worker_error(fake: Fake) -> None:
    fake.keeper.sendall(b'{"exit": "no"}\n')
    with pytest.raises(WorkerError):
        await fake.handle.keeper.wait_exit()
    await fake.handle.close()  # and closing still works
    assert fake.handle.closed


async def test_frames_are_read_as_they_come_and_the_socket_is_unregistered_on_close(
    fake: Fake,
) -> None:
    import asyncio

    fd = fake.handle.channel._raw.fileno()  # which fd the loop watches
    got: list[object] = []

    async def read() -> None:
        got.append(await fake.handle.channel.next_frame())

    for n in range(3):  # each read finds nothing and waits for readiness
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await anyio.wait_all_tasks_blocked()  # the reader waits for readiness
            fake.run.sendall(encode({"type": "stdout", "data": f"line {n}"}))
    assert got == [{"type": "stdout", "data": f"line {n}"} for n in range(3)]
    fake.keeper.close()
    await fake.handle.close()
    # The registration was removed before the socket closed (the fd number may be reused).
    assert asyncio.get_running_loop().remove_reader(fd) is False


async def test_readiness_nobody_waits_for_does_not_spin_the_loop(fake: Fake) -> None:
    import asyncio

    fd = fake.handle.channel._raw.fileno()
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            await fake.handle.channel.next_frame()

        tg.start_soon(read)
        await anyio.wait_all_tasks_blocked()  # the reader waits for readiness
        fake.run.sendall(encode({"type": "stdout", "data": "x"}))
    # Unread data arrives while nobody reads: the first readiness unregisters the socket.
    fake.run.sendall(encode({"type": "stdout", "data": "unread"}))
    # The data is there now: the loop's next poll of its selector (an iteration of the
    # loop, at most two yields away) runs the readiness callback; a few more would spin.
    for _ in range(5):
        await anyio.lowlevel.checkpoint()
    assert asyncio.get_running_loop().remove_reader(fd) is False
    assert await fake.handle.channel.next_frame() == {"type": "stdout", "data": "unread"}


async def test_pushed_frames_reach_the_handler_until_it_stops_or_the_stream_ends(
    fake: Fake,
) -> None:
    import asyncio

    fd = fake.handle.channel._raw.fileno()
    seen: list[object] = []

    def until_done(frame: dict[str, object]) -> bool:
        seen.append(frame["data"])
        return frame["data"] != "stop"

    # Frames that came with an earlier read are handled first, then the socket's.
    fake.run.sendall(
        encode({"type": "stdout", "data": "a"}) + encode({"type": "stdout", "data": "b"})
    )
    assert await fake.handle.channel.next_frame() == {"type": "stdout", "data": "a"}
    fake.run.sendall(
        encode({"type": "stdout", "data": "c"})
        + encode({"type": "stdout", "data": "stop"})
        + encode({"type": "stdout", "data": "never"})
    )
    assert await fake.handle.channel.push_frames(until_done) is True
    assert seen == ["b", "c", "stop"]
    assert asyncio.get_running_loop().remove_reader(fd) is False  # unregistered at the end

    fake.run.sendall(encode({"type": "stdout", "data": "d"}))
    fake.run.shutdown(socket.SHUT_WR)
    seen.clear()
    assert await fake.handle.channel.push_frames(until_done) is False  # the end of the stream
    assert seen == ["d"]  # what came after a stop was dropped: the stream was done


async def test_a_malformed_pushed_frame_raises_in_the_waiting_task(fake: Fake) -> None:
    from worker._errors import ProtocolError

    fake.run.sendall(b"\x00\x00\x00\x05{nope")
    with pytest.raises(ProtocolError, match="JSON"):
        await fake.handle.channel.push_frames(lambda frame: True)


async def test_pulled_frames_reach_the_handler_until_it_stops_or_the_stream_ends(
    fake: Fake,
) -> None:
    # What push_frames falls back to away from asyncio.
    seen: list[object] = []

    def until_done(frame: dict[str, object]) -> bool:
        seen.append(frame["data"])
        return frame["data"] != "stop"

    fake.run.sendall(
        encode({"type": "stdout", "data": "a"}) + encode({"type": "stdout", "data": "stop"})
    )
    assert await fake.handle.channel.pull_frames(until_done) is True
    fake.run.sendall(encode({"type": "stdout", "data": "b"}))
    fake.run.shutdown(socket.SHUT_WR)
    assert await fake.handle.channel.pull_frames(until_done) is False
    assert seen == ["a", "stop", "b"]


async def test_a_child_that_never_said_hello_is_ended_by_its_channels_at_once(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No pid to signal and no report coming: the old close waited the kill's whole
    # confirmation bound for a report (seconds, in a burst of starts cut short by Ctrl-C).
    # With that bound made endless, only a close that does not wait can pass the guard.
    monkeypatch.setattr(worker._host._child_handle, "KILL_CONFIRM_S", 3600.0)
    with anyio.fail_after(DEADLOCK_GUARD_S):
        await fake.handle.close()
    assert fake.handle.closed
    # Both channels ended: the keeper kills the child when its socket ends, the child
    # exits when its channel does.
    assert fake.keeper.recv(1) == b"" and fake.run.recv(1) == b""


async def test_a_start_cancelled_as_its_lines_arrive_closes_both_sockets_and_the_loop_stays_clean(
    stand_in: subprocess.Popen[bytes],
) -> None:
    """A closing pool cancels children being primed while the zygote answers them: the
    handshake is cancelled in the same loop turn its line becomes readable. Nothing may fail
    in the event loop's callbacks (a stream's cancelled read did: ``InvalidStateError``), and
    the handle's close must end with both sockets closed."""
    loop_errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: loop_errors.append(ctx))
    hello = Hello(keeper_pid=0, child_pid=stand_in.pid).to_line()
    for turn in range(200):
        run_host, run_child = socket.socketpair()
        keep_host, keep_child = socket.socketpair()
        handle = ChildHandle(
            run=run_host, keeper=keep_host, cgroups=RunCgroups(), scratch=tempfile.mkdtemp()
        )
        with run_child, keep_child:
            async with anyio.create_task_group() as tg:
                tg.start_soon(handle.handshake, 5.0)
                for _ in range(turn % 3):
                    await anyio.lowlevel.checkpoint()
                keep_child.sendall(hello if turn % 2 else b"")
                tg.cancel_scope.cancel()
            with anyio.fail_after(DEADLOCK_GUARD_S):
                await handle.close()
        assert run_host.fileno() == -1 and keep_host.fileno() == -1
    await anyio.sleep(0.01)
    assert loop_errors == []
