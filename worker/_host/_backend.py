"""``SubprocessBackend``: one fresh contained child per run, forked from a zygote.

Per run: take a child from the pool (``_pool``: primed for this run's SDK module and limits
when one is, else an unprimed one whose limits are applied now), check the enforcement the
containment requires, then hand the child to a :class:`~worker._host._runloop.RunLoop`. Every
exit path closes the child: a run that ended with ``done`` has its tree killed at once and
confirmed gone in the background; any other end (a limit, a breach, abort, cancellation)
is confirmed before the run returns. Scratch dir and cgroups are removed with the child.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Mapping

import anyio

from .._abc import CallHandler, StdoutListener, WorkerBackend
from .._child._source import program_size_problem
from .._errors import StartFailed, WorkerError
from .._kernel import _enforcement
from .._types import (
    DIMENSIONS,
    Containment,
    Dimension,
    Enforcement,
    FailureKind,
    Limits,
    RunOutcome,
    RunRequest,
)
from ._child_handle import ChildHandle
from ._pool import ChildPool, RunKey
from ._runloop import RunLoop
from ._timing import timing_mark

EXIT_REPORT_S = 1.0
"""How long a finished run waits for an exit report when its child is already gone (its
CPU time and peak memory are in the report). It comes as soon as the keeper reaps the
child, so the bound is only reached on a busy machine, where a child that freed hundreds
of MiB at exit took 50 ms and more: a shorter wait then returned an unmeasured peak."""


class SubprocessBackend(WorkerBackend):
    """Runs each program in a fresh child forked from a zygote, contained per ``containment``.

    ``start()`` warms up (zygote + pool); ``run`` starts it lazily. ``aclose()`` stops the
    zygote, kills the pool and reaps everything.
    """

    def __init__(self, containment: Containment | None = None) -> None:
        self.containment = containment or Containment()
        self._pool = ChildPool(self.containment)
        self._closed = False
        self._probe: dict[Dimension, Enforcement] | None = None

    @property
    def closed(self) -> bool:
        """Whether ``aclose()`` ran: ``run`` raises ``WorkerError`` from then on."""
        return self._closed

    @property
    def zygote_pid(self) -> int | None:
        """The zygote's pid while it runs, else ``None``."""
        return self._pool.zygote.pid

    @property
    def pooled(self) -> tuple[ChildHandle, ...]:
        """The never-used children waiting in the pool (for inspection: tests, benchmarks)."""
        return self._pool.children

    async def spawn(self) -> ChildHandle:
        """Fork one contained child and wait for its ``ready``. Raises ``WorkerError``."""
        return await self._pool.spawn()

    async def start(self) -> None:
        """Start the zygote and fill the pool with children that have sent ``ready`` (and
        are primed for the last run's SDK and limits); background work is finished first."""
        if self._closed:
            raise WorkerError("backend is closed")
        await self._pool.fill()

    async def settle(self) -> None:
        """Wait until the background work is done: the teardown of children whose runs
        ended with ``done`` (tree confirmed gone, scratch dir and cgroups removed), the
        pool's refill and priming."""
        await self._pool.chores.wait()

    async def take(self, request: RunRequest) -> ChildHandle:
        """A child as a run of ``request`` would get it (for benchmarks; closing it is the
        caller's job)."""
        child, _ = await self._pool.take(RunKey.of(request.sdk_module, request.limits))
        return child

    async def run(
        self,
        request: RunRequest,
        *,
        on_calls: CallHandler,
        on_stdout: StdoutListener | None = None,
        abort: anyio.Event | None = None,
        started: float | None = None,
    ) -> RunOutcome:
        if started is None:
            started = time.monotonic()
        deadline = started + request.limits.wall_seconds
        if self._closed:
            raise WorkerError("backend is closed")
        loop = RunLoop(
            request,
            on_calls=on_calls,
            on_stdout=on_stdout,
            abort=abort,
            deadline=deadline,
            started=started,
        )
        too_large = program_size_problem(request.code)
        if too_large is not None:
            return loop.fail("preflight", too_large, {})
        if time.monotonic() >= deadline:
            return loop.fail("timeout", loop.timeout_detail(), {})
        key = RunKey.of(request.sdk_module, request.limits)
        try:
            with anyio.fail_after(max(deadline - time.monotonic(), 0)):
                child, enforcement = await self._pool.take(key)
        except StartFailed as exc:
            # A cause that stays (a permission, a kernel feature): this host cannot give
            # the sandbox asked for, and says which step and why.
            kind: FailureKind = "sandbox-unavailable" if exc.lasting else "worker-exit"
            return loop.fail(kind, str(exc), {})
        except WorkerError as exc:
            return loop.fail("worker-exit", str(exc), {})
        except TimeoutError:
            return loop.fail("timeout", loop.timeout_detail(), {})
        finished = False
        try:
            outcome = await self._run_child(loop, child, key, enforcement)
            finished = outcome is None and loop.finished
        finally:
            loop.peak_memory_kib = child.cgroups.peak_memory_kib()
            if loop.peak_memory_kib is None:
                loop.peak_memory_kib = child.peak_rss_kib()
            if not finished and child.pid > 0:
                # Read while it may still live (a timeout, an abort): the kill that follows
                # gives the keeper only a moment to report before cgroup.kill takes it down
                # too, and on a busy machine its report (the rusage) may not come at all.
                loop.cpu_ms = child.cpu_ms_now() or 0.0
            if finished:
                cpu_ms = child.cpu_ms_now() if child.pid > 0 else 0.0
                if cpu_ms is None or loop.peak_memory_kib is None:
                    # Already exited (or reaped): its keeper's exit report is on its way,
                    # with the rusage these come from.
                    with anyio.move_on_after(EXIT_REPORT_S), contextlib.suppress(WorkerError):
                        await child.keeper.wait_exit()
                loop.cpu_ms = cpu_ms or 0.0
            await self._pool.release(child, finished=finished)
        timing_mark("returned")
        return loop.finish(outcome, child)

    async def _run_child(
        self,
        loop: RunLoop,
        child: ChildHandle,
        key: RunKey,
        enforcement: dict[Dimension, Enforcement] | None,
    ) -> RunOutcome | None:
        if enforcement is None:  # an unprimed child: its limits are applied now
            try:
                enforcement = await self._pool.limit(child, key)
            except WorkerError as exc:  # the host out of file descriptors
                return loop.fail("worker-exit", str(exc), {})
        loop.enforcement = enforcement
        missing = _enforcement.missing(self.containment, enforcement)
        if missing is not None:
            return loop.fail("sandbox-unavailable", missing, enforcement)
        timing_mark("checkout")
        return await loop.drive(child)

    def probe(self) -> Mapping[Dimension, Enforcement]:
        """The enforcement runs get on this host: one child is started with this
        containment (by a zygote of its own, in a thread, blocking the caller for a fraction
        of a second the first time), given the default ``Limits``, and closed; it runs no
        program. Measured, not derived, so it is what a run reports (a run whose own steps
        fail, e.g. a cgroup write, reports less). When no child can start, every dimension
        is ``none`` and its gap says why."""
        if self._probe is None:
            found: list[dict[Dimension, Enforcement] | BaseException] = []

            def measure() -> None:
                try:
                    found.append(anyio.run(_measure, self.containment))
                except BaseException as exc:  # raised again in the caller's thread
                    found.append(exc)

            # A thread with an event loop of its own: the caller may be inside one.
            thread = threading.Thread(target=measure, name="ptc-probe")
            thread.start()
            thread.join()
            if isinstance(found[0], BaseException):
                raise found[0]
            self._probe = found[0]
        return dict(self._probe)

    async def aclose(self) -> None:
        self._closed = True
        await self._pool.aclose()


async def _measure(containment: Containment) -> dict[Dimension, Enforcement]:
    pool = ChildPool(dataclasses.replace(containment, pool_size=0))
    try:
        child = await pool.spawn()
        try:
            return await pool.limit(child, RunKey.of("", Limits()))
        finally:
            await child.close()
    except WorkerError as exc:
        return {
            d: Enforcement(level="none", mechanism="no child started", gap=str(exc))
            for d in DIMENSIONS
        }
    finally:
        await pool.aclose()
