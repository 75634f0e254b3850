"""``SubprocessBackend``: one fresh contained child per run, forked from a zygote.

Keeps a small pool of children that were requested from the zygote ahead of time. Per
run: take a pooled child (or fork one), finish its handshake, write its cgroup memory
limit, have its keeper lower the per-run rlimits, check the enforcement the containment
requires, then hand the child to a :class:`~worker._runloop.RunLoop`. Every exit path
closes the child: the tree is killed (confirmed), the scratch dir and cgroups removed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping
from typing import Any

import anyio
from anyio.abc import UNIXSocketStream

from . import _enforcement, _landlock, _seccomp
from ._abc import CallHandler, StdoutListener, WorkerBackend
from ._cgroups import CgroupJanitor, RunCgroups
from ._child._source import program_size_problem
from ._child_handle import ChildHandle, host_resource_error
from ._errors import WorkerError
from ._keeper_lines import LimitsRequest
from ._runloop import RunLoop
from ._types import Containment, Dimension, Enforcement, RunOutcome, RunRequest
from ._zygote import ZygoteClient

SPAWN_TIMEOUT_S = 10.0


class SubprocessBackend(WorkerBackend):
    """Runs each program in a fresh child forked from a zygote, contained per ``containment``.

    ``start()`` warms up (zygote + pool); ``run`` starts it lazily. ``aclose()`` stops the
    zygote, kills the pool and reaps everything.
    """

    def __init__(self, containment: Containment | None = None) -> None:
        self.containment = containment or Containment()
        self._zygote = ZygoteClient()
        self._pool: list[ChildHandle] = []
        self._doomed: list[ChildHandle] = []
        self._janitor = CgroupJanitor()
        self._counter = 0
        # Unique per backend: two backends in one process must never share a run's cgroups.
        self._tag = secrets.token_hex(4)
        self._closed = False
        self._probe: dict[Dimension, Enforcement] | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def zygote_pid(self) -> int | None:
        return self._zygote.pid

    @property
    def pooled(self) -> tuple[ChildHandle, ...]:
        """The never-used children waiting in the pool (for inspection: tests, benchmarks)."""
        return tuple(self._pool)

    def _cfg(self, scratch: str, cgroups: RunCgroups) -> dict[str, Any]:
        c = self.containment
        groups = [
            [n, os.path.join(p, "cgroup.procs")]
            for n, p in (
                ("memory", cgroups.memory),
                ("pids", cgroups.pids),
                ("unified", cgroups.unified),
            )
            if p
        ]
        return {
            "scratch": scratch,
            "cgroups": groups,
            "namespaces": c.namespaces,
            "rlimits": c.rlimits,
            "landlock": c.landlock,
            "seccomp": c.seccomp,
            "drop_privileges": c.drop_privileges,
        }

    async def _request(self) -> ChildHandle:
        """Ask the zygote for one child without waiting for it (the handshake comes later).

        Raises ``WorkerError`` (with nothing left behind: sockets, scratch dir, cgroups)
        when the host cannot provide what a child needs, e.g. file descriptors."""
        self._counter += 1
        name = f"ptc-{os.getpid()}-{self._tag}-{self._counter}"
        sockets: list[socket.socket] = []
        scratch = ""
        cgroups = RunCgroups()
        try:
            try:
                sockets.extend(socket.socketpair())
                sockets.extend(socket.socketpair())
                scratch = tempfile.mkdtemp(prefix="ptc-run-")
                if self.containment.cgroups:
                    cgroups = RunCgroups.create(name)
                run_host, run_child, keep_host, keep_child = sockets
                self._zygote.request(
                    self._cfg(scratch, cgroups), [run_child.fileno(), keep_child.fileno()]
                )
            finally:
                for far_end in sockets[1::2]:
                    far_end.close()  # the zygote has its own copies by now (or never will)
            run = await UNIXSocketStream.from_socket(run_host)
            keeper = await UNIXSocketStream.from_socket(keep_host)
        except BaseException as exc:
            for near_end in sockets[0::2]:
                near_end.close()
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            cgroups.remove()
            if isinstance(exc, OSError):
                raise WorkerError(host_resource_error(exc)) from exc
            raise
        return ChildHandle(run=run, keeper=keeper, cgroups=cgroups, scratch=scratch)

    async def spawn(self) -> ChildHandle:
        """Fork one contained child and wait for its ``ready``. Raises ``WorkerError``."""
        child = await self._request()
        await child.handshake(SPAWN_TIMEOUT_S)
        return child

    async def start(self) -> None:
        """Start the zygote and fill the pool with children that have sent ``ready``."""
        if self._closed:
            raise WorkerError("backend is closed")
        await self._refill()
        for child in list(self._pool):
            try:
                await child.handshake(SPAWN_TIMEOUT_S)
            except WorkerError:
                self._pool.remove(child)
                raise

    async def _refill(self) -> None:
        """Top the pool up with requested children (their handshake completes on take)."""
        if not self._zygote.alive():
            pool, self._pool = self._pool, []
            self._doomed.extend(pool)  # forked by a dead zygote: closed at the next run
        while len(self._pool) < self.containment.pool_size and not self._closed:
            self._pool.append(await self._request())

    async def _take(self) -> ChildHandle:
        for child in self._doomed:
            await child.close()
        self._doomed.clear()
        if not self._zygote.alive():
            await self._refill()
        while self._pool:
            child = self._pool.pop(0)
            try:
                await child.handshake(SPAWN_TIMEOUT_S)
            except WorkerError:
                continue
            if child.exit is None and not child.closed:
                return child
            await child.close()
        return await self.spawn()

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
        try:
            with anyio.fail_after(max(deadline - time.monotonic(), 0)):
                child = await self._take()
        except WorkerError as exc:
            return loop.fail("worker-exit", str(exc), {})
        except TimeoutError:
            return loop.fail("timeout", loop.timeout_detail(), {})
        try:
            with contextlib.suppress(WorkerError):
                await self._refill()
            outcome = await self._run_child(loop, child)
        finally:
            loop.peak_memory_kib = child.cgroups.peak_memory_kib()
            await child.close(self._janitor)
        return loop.finish(outcome, child)

    async def _run_child(self, loop: RunLoop, child: ChildHandle) -> RunOutcome | None:
        enforcement = child.enforcement
        limits = loop.request.limits
        if self.containment.cgroups and child.cgroups.memory is not None:
            if not child.cgroups.set_memory_limit(limits.memory_mib * 1024 * 1024):
                enforcement["memory"] = Enforcement(
                    level="partial", mechanism="RLIMIT_AS", gap="could not write cgroup limit"
                )
        ack = await child.apply_limits(
            LimitsRequest(
                cpu_seconds=limits.cpu_seconds,
                memory_mib=limits.memory_mib,
                scratch_mib=limits.scratch_mib,
            )
        )
        if self.containment.rlimits and not ack.applied:
            enforcement["cpu"] = Enforcement(
                level="none", mechanism="none", gap=f"RLIMIT_CPU not applied: {ack.error}"
            )
        if ack.scratch_error and "tmpfs" in enforcement["filesystem"].mechanism:
            fs = enforcement["filesystem"]
            gap = f"scratch quota not applied: {ack.scratch_error}"
            enforcement["filesystem"] = Enforcement(
                level=fs.level, mechanism=fs.mechanism, gap="; ".join(filter(None, [fs.gap, gap]))
            )
        loop.enforcement = enforcement
        missing = _enforcement.missing(self.containment, enforcement)
        if missing is not None:
            return loop.fail("sandbox-unavailable", missing, enforcement)
        return await loop.drive(child)

    def probe(self) -> Mapping[Dimension, Enforcement]:
        """Predicted enforcement, from host capabilities (no child is forked)."""
        if self._probe is None:
            c = self.containment
            cg = RunCgroups.create(f"ptc-probe-{os.getpid()}") if c.cgroups else RunCgroups()
            groups = tuple(n for n in ("memory", "pids", "unified") if getattr(cg, n))
            cg.remove()
            abi = _landlock.abi_version() if c.landlock else 0
            userns = os.path.exists("/proc/self/ns/user") and _userns_allowed()
            facts = _enforcement.Facts(
                namespaces=("user", "net", "ipc", "mount", "pid")
                if c.namespaces and userns
                else (),
                cgroups=groups,
                rlimits=c.rlimits,
                landlock_abi=abi,
                seccomp=c.seccomp and _seccomp.available(),
            )
            self._probe = _enforcement.from_json(_enforcement.report(facts))
        return dict(self._probe)

    async def aclose(self) -> None:
        self._closed = True
        with anyio.CancelScope(shield=True):
            pool, self._pool = self._pool + self._doomed, []
            self._doomed = []
            for child in pool:
                if not child.ready:
                    with contextlib.suppress(WorkerError):
                        await child.handshake(SPAWN_TIMEOUT_S)
                await child.close()
            self._zygote.stop()
            await anyio.to_thread.run_sync(self._janitor.close)


def _userns_allowed() -> bool:
    try:
        with open("/proc/sys/user/max_user_namespaces", encoding="ascii") as fh:
            return int(fh.read()) > 0
    except (OSError, ValueError):
        return True
