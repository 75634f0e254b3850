"""SubprocessBackend: the run contract against a real zygote and contained children."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from tests._backends import run_on_a_loop_anyio_did_not_start
from tests.security._support import (
    PROCESSES_PER_PRIMED_CHILD,
    SDK,
    SHORT,
    EchoStarter,
    descendants,
    echo_calls,
    eventually,
    run,
    scratch_dirs,
    zombies,
)
from worker import (
    DIMENSIONS,
    MAX_PROGRAM_BYTES,
    CallBatch,
    CallReply,
    CallRequest,
    CallStarter,
    Containment,
    Limits,
    RunOutcome,
    RunRequest,
    SubprocessBackend,
)

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root]


@pytest.fixture
async def backend() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend() as b:
        yield b


async def test_returns_the_value_with_full_enforcement_and_stats(
    backend: SubprocessBackend,
) -> None:
    out = await run(backend, "print('hi')\nreturn {'n': 1}")
    assert out.ok and out.value == {"n": 1}
    assert out.output.text == "hi\n"
    assert set(out.enforcement) == set(DIMENSIONS)
    assert all(e.level == "full" for e in out.enforcement.values()), out.enforcement_json()
    assert out.stats.wall_ms > 0 and out.stats.cpu_ms > 0
    assert out.stats.peak_memory_kib is not None and out.stats.peak_memory_kib > 0


async def test_calls_are_answered_in_batches_and_stdout_streams_in_order(
    backend: SubprocessBackend,
) -> None:
    batches: list[list[int]] = []
    streamed: list[str] = []

    async def handler(calls: Sequence[CallRequest]) -> list[CallReply]:
        batches.append([c.id for c in calls])
        return await echo_calls(calls)

    code = "print('a')\nx = tools.echo.map([{'i': 1}, {'i': 2}])\nprint('b')\nreturn x"
    request = RunRequest(code=code, sdk_module=SDK, limits=SHORT)
    out = await backend.run(request, on_calls=handler, on_stdout=streamed.append)
    assert out.value == [{"i": 1}, {"i": 2}]
    assert batches == [[1, 2]]
    assert "".join(streamed) == "a\nb\n"
    assert out.stats.calls == 2


async def test_a_failed_call_raises_in_the_program(backend: SubprocessBackend) -> None:
    code = "try:\n    tools.fail()\nexcept ToolCallError as e:\n    return e.code"
    assert (await run(backend, code)).value == "TOOL_FAILED"


async def test_worker_logs_are_re_emitted_under_ptc_worker(
    backend: SubprocessBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ptc.worker")
    await run(backend, "import logging\nlogging.getLogger('prog').warning('careful %d', 3)")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("ptc.worker.prog", "careful 3")]


async def test_abort_kills_the_run_and_keeps_output(backend: SubprocessBackend) -> None:
    abort = anyio.Event()
    code = "import time\nprint('started', flush=True)\ntime.sleep(30)"

    def on_stdout(text: str) -> None:
        abort.set()

    request = RunRequest(code=code, sdk_module=SDK, limits=SHORT)
    out = await backend.run(request, on_calls=echo_calls, on_stdout=on_stdout, abort=abort)
    assert out.kind == "abort"
    assert out.output.text == "started\n"


async def test_cancellation_kills_the_child_and_re_raises(backend: SubprocessBackend) -> None:
    request = RunRequest(code="import time\ntime.sleep(30)", sdk_module=SDK, limits=SHORT)
    with anyio.move_on_after(0.3) as scope:
        await backend.run(request, on_calls=echo_calls)
    assert scope.cancelled_caught
    # only the pooled children remain: the cancelled run's is gone
    await backend.start()  # complete the pool's handshakes
    expected = PROCESSES_PER_PRIMED_CHILD * len(backend.pooled)
    assert await eventually(lambda: len(descendants(backend.zygote_pid or 0)) == expected)
    assert (await run(backend, "return 'next'")).value == "next"


async def test_a_handler_exception_propagates_and_kills_the_run(
    backend: SubprocessBackend,
) -> None:
    async def broken(calls: Sequence[CallRequest]) -> list[CallReply]:
        raise RuntimeError("host bug")

    request = RunRequest(code="tools.echo()", sdk_module=SDK, limits=SHORT)
    with pytest.raises(RuntimeError, match="host bug"):
        await backend.run(request, on_calls=broken)


async def test_a_start_frame_larger_than_the_socket_buffer_arrives_whole(
    backend: SubprocessBackend,
) -> None:
    # What the socket does not take at once is sent after it, in order.
    size = MAX_PROGRAM_BYTES - 100
    out = await run(backend, f"x = '{'a' * (size - 30)}'\nreturn len(x)")
    assert out.ok and out.value == size - 30, out


class Starter:
    """A :class:`CallStarter` that answers each batch from a task group of its own."""

    def __init__(self, tg: anyio.abc.TaskGroup, *, fail: bool = False) -> None:
        self.tg = tg
        self.fail = fail
        self.batches: list[list[int]] = []
        self.held: list[CallBatch] = []

    async def __call__(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
        raise AssertionError("a CallStarter is handed its batches, never awaited")

    def start(self, batch: CallBatch) -> None:
        self.batches.append([c.id for c in batch.calls])
        if self.fail:
            batch.fail(RuntimeError("host bug in a started batch"))
        elif any(c.arguments.get("hold") for c in batch.calls):
            self.held.append(batch)
        else:
            self.tg.start_soon(self._answer, batch)

    async def _answer(self, batch: CallBatch) -> None:
        await anyio.lowlevel.checkpoint()  # answered later, from another task
        await batch.reply(await echo_calls(batch.calls))


@pytest.mark.parametrize("handler", ["handler", "starter"])
def test_nested_calls_work_on_an_asyncio_loop_anyio_did_not_start(handler: str) -> None:
    # With sniffio installed (most hosts have it), anyio finds the running backend through
    # it, which outside a task works only on a loop anyio.run started (its context says
    # so). Ray's actors and hosts that call asyncio.run() run loops anyio did not start;
    # the run loop must then call anyio from tasks only, never from the reader callback.

    async def main() -> RunOutcome:
        async with SubprocessBackend() as backend:
            code = "return [tools.echo(n=1), tools.echo.map([{'n': 2}, {'n': 3}])]"
            request = RunRequest(code=code, sdk_module=SDK, limits=SHORT)
            on_calls = EchoStarter() if handler == "starter" else echo_calls
            return await backend.run(request, on_calls=on_calls)

    outcome = run_on_a_loop_anyio_did_not_start(main)
    assert outcome.ok, (outcome.kind, outcome.detail)
    assert outcome.value == [{"n": 1}, [{"n": 2}, {"n": 3}]]


async def test_a_call_starter_answers_batches_from_its_own_tasks(
    backend: SubprocessBackend,
) -> None:
    async with anyio.create_task_group() as tg:
        starter = Starter(tg)
        assert isinstance(starter, CallStarter)
        code = "a = tools.echo(n=1)\nb = tools.echo.map([{'n': 2}, {'n': 3}])\nreturn [a, b]"
        request = RunRequest(code=code, sdk_module=SDK, limits=SHORT)
        out = await backend.run(request, on_calls=starter)
    assert out.ok, out
    assert out.value == [{"n": 1}, [{"n": 2}, {"n": 3}]]
    assert starter.batches == [[1], [2, 3]]


async def test_a_started_batch_that_fails_kills_the_run_and_raises(
    backend: SubprocessBackend,
) -> None:
    async with anyio.create_task_group() as tg:
        request = RunRequest(code="tools.echo()", sdk_module=SDK, limits=SHORT)
        with pytest.raises(RuntimeError, match="host bug in a started batch"):
            await backend.run(request, on_calls=Starter(tg, fail=True))


async def test_replies_to_a_batch_after_its_run_ended_go_nowhere(
    backend: SubprocessBackend,
) -> None:
    async with anyio.create_task_group() as tg:
        starter = Starter(tg)
        limits = Limits(wall_seconds=0.5, cpu_seconds=2.0, memory_mib=256)
        request = RunRequest(code="tools.echo(hold=True)", sdk_module=SDK, limits=limits)
        out = await backend.run(request, on_calls=starter)
        assert out.kind == "timeout"
        [batch] = starter.held
        await batch.reply([CallReply.success(1)])  # no error, nothing sent
        batch.fail(RuntimeError("too late"))  # and no effect
    assert (await run(backend, "return 'next'")).value == "next"


async def test_required_dimension_missing_fails_closed() -> None:
    async with SubprocessBackend(Containment(seccomp=False, pool_size=0)) as b:
        out = await run(b, "return 1")
    assert out.kind == "sandbox-unavailable"
    # Without seccomp a net namespace still leaves the filesystem's unix sockets reachable.
    assert "network is partial" in out.detail and "processes is partial" in out.detail
    assert "Containment(require=...) without 'network', 'processes'" in out.detail
    assert "(ptc run / ptc serve: --require filesystem,memory,cpu)" in out.detail
    assert out.enforcement["processes"].level == "partial"


async def test_a_dead_zygote_is_restarted(backend: SubprocessBackend) -> None:
    first = backend.zygote_pid
    assert first is not None
    pidfd = os.pidfd_open(first)
    try:
        os.kill(first, 9)
        with anyio.fail_after(10):
            await anyio.wait_readable(pidfd)  # readable once it has exited
    finally:
        os.close(pidfd)
    out = await run(backend, "return 'again'")
    assert out.value == "again"
    assert backend.zygote_pid != first


async def test_a_run_whose_zygote_is_killed_names_the_zygote(backend: SubprocessBackend) -> None:
    # The zygote supervises its children; they die with it (their death signal), and the
    # run says which process died, not that the child ended without a status.
    started = anyio.Event()
    outcome: list[RunOutcome] = []

    async def launch() -> None:
        code = "import time\nprint('started', flush=True)\ntime.sleep(30)"
        request = RunRequest(code=code, sdk_module=SDK, limits=Limits(wall_seconds=20))
        outcome.append(
            await backend.run(request, on_calls=echo_calls, on_stdout=lambda _: started.set())
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(launch)
        await started.wait()
        zygote = backend.zygote_pid  # the zygote this test's own backend started
        assert zygote is not None
        os.kill(zygote, 9)
    (out,) = outcome
    assert out.kind == "worker-exit", out
    assert out.detail.startswith(f"the zygote (pid {zygote}), the child's supervisor, died"), out
    assert (await run(backend, "return 'again'")).value == "again"  # a new zygote serves on


async def test_aclose_stops_the_zygote_and_the_pool() -> None:
    b = SubprocessBackend()
    await b.start()
    zygote = b.zygote_pid
    assert zygote is not None and len(b.pooled) == 2
    await b.aclose()
    assert not _alive(zygote)


async def test_probe_predicts_full_enforcement_here(backend: SubprocessBackend) -> None:
    assert {d: e.level for d, e in backend.probe().items()} == dict.fromkeys(DIMENSIONS, "full")


async def test_twenty_concurrent_runs(backend: SubprocessBackend) -> None:
    results: dict[int, object] = {}

    async def one(i: int) -> None:
        out = await run(backend, f"return tools.echo(i={i})")
        results[i] = out.value

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(one, i)
    assert results == {i: {"i": i} for i in range(20)}


@pytest.mark.slow
async def test_no_zombie_and_no_scratch_dir_after_200_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a private temp root, so scratch dirs of other processes on this host do not count
    os.chmod(tmp_path, 0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before_scratch = scratch_dirs()
    assert before_scratch == set()
    async with SubprocessBackend() as b:
        for i in range(200):
            code = "while True: pass" if i % 50 == 49 else f"return {i}"
            out = await run(b, code, Limits(wall_seconds=0.5) if i % 50 == 49 else SHORT)
            assert out.ok or out.kind == "timeout"
        await b.start()  # complete the pool's handshakes
        root = os.path.basename(os.path.dirname(b.pooled[0].scratch))
        pooled = {f"{root}/{os.path.basename(c.scratch)}" for c in b.pooled}
        # The backend's scratch root, and beneath it at most the pooled children's dirs
        # (none where each child mounts a tmpfs of its own).
        left = scratch_dirs() - before_scratch
        assert root in left and left - {root} <= pooled, (left, pooled)
        zygote = b.zygote_pid or 0
        # The last runs' children exited moments ago (torn down in the background): the
        # zygote reaps them as their SIGCHLD arrives; none may stay.
        assert await eventually(lambda: not zombies(zygote)), zombies(zygote)
        expected = PROCESSES_PER_PRIMED_CHILD * len(b.pooled)
        assert await eventually(lambda: len(descendants(zygote)) == expected)
    assert scratch_dirs() == before_scratch
    assert zombies(os.getpid()) == []
    assert not _alive(zygote)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_two_backends_in_one_process_each_get_their_own_cgroups() -> None:
    # A host with two runtimes (say, one per tenant) must not lose containment in either.
    async with SubprocessBackend() as first, SubprocessBackend() as second:
        outcomes = [await run(b, "return 1") for b in (first, second, first, second)]
    for out in outcomes:
        assert out.ok, out.detail
        assert all(e.level == "full" for e in out.enforcement.values()), out.enforcement_json()


async def test_every_child_draws_its_own_random_numbers(backend: SubprocessBackend) -> None:
    # The zygote forks without CPython's at-fork hooks; the one that matters to a program,
    # random's reseed, is done by the child itself.
    code = "import random\nreturn [random.getrandbits(64), random.random()]"
    drawn = [tuple((await run(backend, code)).value) for _ in range(5)]
    assert len(set(drawn)) == 5, drawn
