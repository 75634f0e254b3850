"""The pool of contained children: requested ahead, primed for the runs in use, one run each.

A pooled child is requested from the zygote (its cgroups are made then; its scratch, a
tmpfs or a directory, is made by the child itself, at the size of the key it is asked for),
completes its handshake and is *primed* in the background for a :class:`RunKey` (the SDK
module and the CPU, memory and scratch limits of the run that last took a child): the
cgroup memory limit written, the run's rlimits set by the child on itself (a ``limits``
frame), the SDK module pre-loaded with an ``sdk`` frame (the child compiles it while it
waits). A run takes a child primed for its own key, else an unprimed one of its scratch
size (limits and SDK module then on its critical path). A child primed for one key never
serves another, and no child serves two runs: :meth:`ChildPool.take` removes it.

Off the critical path (:class:`Chores`): topping the pool up, priming, and the teardown of
a child whose run finished normally (it is SIGKILLed at once; the confirmation that the tree
is gone, the socket, scratch dir and cgroup removal follow). A child killed for a limit, a
protocol breach, an abort or a cancellation is confirmed gone before its run returns.

A child that cannot start is never retried blindly. A lasting cause (:class:`StartFailed`
with ``lasting``: a permission the host lacks, a kernel feature refused) fails every run at
once with that cause for :data:`LASTING_RETRY_S`, and nothing is forked meanwhile; after
any other failure the background refill waits, longer after each failure in a row.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import socket
import tempfile
import time
from dataclasses import dataclass

import anyio

from .._errors import StartFailed, WorkerError
from .._kernel import _landlock
from .._protocol._spawn_config import ChildRequest, ZygoteConfig
from .._types import Containment, Dimension, Enforcement, Level, Limits
from ._cgroups import CgroupJanitor, RunCgroups
from ._child_handle import ChildHandle, host_resource_error, remove_scratch
from ._chores import Chores
from ._leftovers import host_mark, sweep_dead_hosts
from ._zygote_client import ZygoteClient

SPAWN_TIMEOUT_S = 10.0
LASTING_RETRY_S = 10.0
"""After a lasting start failure: how long runs fail at once before a child is tried again."""
REFILL_BACKOFF_S = (0.1, 5.0)
"""The background refill's wait after a start failure: first, and at most (doubling)."""
logger = logging.getLogger("ptc.worker")


DEFAULT_SCRATCH_MIB = Limits().scratch_mib
"""The scratch size of a child asked for before any run (its key not known yet)."""


@dataclass(frozen=True, slots=True)
class RunKey:
    """What a primed child is prepared for: the SDK module and the limits it and its cgroup
    were given (its scratch was made at that size)."""

    sdk_module: str
    cpu_seconds: float
    memory_mib: int
    scratch_mib: int

    @classmethod
    def of(cls, sdk_module: str, limits: Limits) -> RunKey:
        return cls(sdk_module, limits.cpu_seconds, limits.memory_mib, limits.scratch_mib)


def _worse(was: Enforcement, level: Level, gap: str) -> Enforcement:
    """``was``, at ``level`` at best, with ``gap`` added (a host step failed after the
    child reported what it applied)."""
    order = ("none", "partial", "full")
    worst = min(was.level, level, key=order.index)
    return Enforcement(
        level=worst, mechanism=was.mechanism, gap="; ".join(filter(None, [was.gap, gap]))
    )


class _Entry:
    """One pooled child and what it is (being) primed for."""

    __slots__ = ("child", "enforcement", "error", "key", "primed")

    def __init__(self, child: ChildHandle, key: RunKey | None) -> None:
        self.child = child
        self.key = key
        self.primed = anyio.Event()
        self.enforcement: dict[Dimension, Enforcement] | None = None
        self.error: WorkerError | None = None


class ChildPool:
    """Children for runs: see the module docstring."""

    def __init__(self, containment: Containment) -> None:
        self.containment = containment
        self._mark = host_mark()
        self._swept = False
        self.root = os.path.join(tempfile.gettempdir(), f"{self._mark}-{secrets.token_hex(6)}")
        """Where every child's scratch is: ``<root>/scratch`` (a tmpfs each child mounts
        in a mount namespace of its own) or ``<root>/run-<n>`` (a directory of its own).
        Made when the zygote starts, removed when the pool closes."""
        self.zygote = ZygoteClient(self._zygote_config())
        self.chores = Chores()
        self.janitor = CgroupJanitor()
        self._pool: list[_Entry] = []
        self._doomed: list[ChildHandle] = []
        self._last_key: RunKey | None = None
        self._refilling = False
        self._compiled: tuple[int | None, str] | None = None
        """(zygote pid, SDK module) the zygote was last asked to compile."""
        self._counter = 0
        # Unique per pool: two backends in one process must never share a run's cgroups.
        self._tag = secrets.token_hex(4)
        self.closed = False
        self._refused: StartFailed | None = None
        self._refused_at = 0.0
        self._failures = 0
        self._refill_after = 0.0

    @property
    def children(self) -> tuple[ChildHandle, ...]:
        return tuple(e.child for e in self._pool)

    # --- making children --------------------------------------------------------------

    def _zygote_config(self) -> ZygoteConfig:
        c = self.containment
        return ZygoteConfig(
            root=self.root,
            landlock_abi_limit=_landlock.ABI_LIMIT,
            # A hard scratch quota without a tmpfs costs the child its threads: only when
            # the run requires a full filesystem.
            scratch_gate="filesystem" in c.require,
            namespaces=c.namespaces,
            rlimits=c.rlimits,
            landlock=c.landlock,
            seccomp=c.seccomp,
            drop_privileges=c.drop_privileges,
        )

    def _cfg(self, scratch: str, cgroups: RunCgroups, key: RunKey | None) -> ChildRequest:
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
        return ChildRequest(
            scratch=scratch,
            cgroups=groups,
            cgroup_v2_controllers=list(cgroups.v2_controllers),
            cgroup_note="cgroups off" if not c.cgroups else cgroups.note,
            scratch_mib=key.scratch_mib if key is not None else DEFAULT_SCRATCH_MIB,
        )

    async def request(self, key: RunKey | None) -> ChildHandle:
        """Ask the zygote for one child for runs of ``key`` (``None``: not known yet)
        without waiting for it (the handshake comes later).

        Raises ``WorkerError`` (with nothing left behind: sockets, scratch dir, cgroups)
        when the host cannot provide what a child needs, e.g. file descriptors."""
        if not self._swept:  # once: what hosts that died without a word left, never a live one's
            self._swept = True
            sweep_dead_hosts()
        if key is not None:
            self._precompile(key.sdk_module)
        self._counter += 1
        name = f"{self._mark}-{self._tag}-{self._counter}"
        sockets: list[socket.socket] = []
        scratch = os.path.join(self.root, f"run-{self._counter}")  # made by the child, if used
        cgroups = RunCgroups()
        try:
            try:
                sockets.extend(socket.socketpair())
                sockets.extend(socket.socketpair())
                if self.containment.cgroups:
                    cgroups = self.janitor.take(name)
                run_host, run_child, keep_host, keep_child = sockets
                self.zygote.request(
                    self._cfg(scratch, cgroups, key), [run_child.fileno(), keep_child.fileno()]
                )
            finally:
                for far_end in sockets[1::2]:
                    far_end.close()  # the zygote has its own copies by now (or never will)
        except BaseException as exc:
            for near_end in sockets[0::2]:
                near_end.close()
            cgroups.remove()
            if isinstance(exc, OSError):
                raise WorkerError(host_resource_error(exc)) from exc
            raise
        return ChildHandle(run=run_host, keeper=keep_host, cgroups=cgroups, scratch=scratch)

    def _precompile(self, module: str) -> None:
        """The zygote compiles the SDK module in use once; the children forked after
        share the code (a zygote restarted since is asked again)."""
        if self.zygote.alive() and self._compiled == (self.zygote.pid, module):
            return
        if self.zygote.compile(module):  # starts the zygote if it is not running
            self._compiled = (self.zygote.pid, module)

    async def spawn(self, key: RunKey | None = None) -> ChildHandle:
        """Fork one contained child (for runs of ``key``, when known) and wait for its
        ``ready``. Raises ``WorkerError`` (at once, without forking, while a lasting start
        failure stands)."""
        self.check_refused()
        child = await self.request(key)
        try:
            await child.handshake(SPAWN_TIMEOUT_S)
        except WorkerError as exc:
            self._start_failed(exc)
            raise
        self._failures = 0
        return child

    def check_refused(self) -> None:
        """Raise the lasting start failure that still stands, if one does."""
        if self._refused is not None and time.monotonic() < self._refused_at + LASTING_RETRY_S:
            raise self._refused

    def _start_failed(self, exc: WorkerError) -> None:
        """A child did not start: remember a lasting cause, back the refill off."""
        self._failures += 1
        wait = min(REFILL_BACKOFF_S[0] * 2 ** (self._failures - 1), REFILL_BACKOFF_S[1])
        if isinstance(exc, StartFailed) and exc.lasting:
            if self._refused is None:
                logger.error("no child can start on this host: %s", exc)
            self._refused = exc
            self._refused_at = time.monotonic()
            wait = LASTING_RETRY_S
        self._refill_after = time.monotonic() + wait

    async def limit(self, child: ChildHandle, key: RunKey) -> dict[Dimension, Enforcement]:
        """Write the cgroup memory limit and have the child set the run's rlimits on itself;
        the child's enforcement, downgraded where that failed. ``WorkerError`` when the
        host is out of file descriptors: that child cannot serve a run, and it is not the
        host's cgroups that failed (a run must not be told memory containment is missing)."""
        enforcement = child.enforcement
        capped = False  # a memory cgroup holds the run
        if self.containment.cgroups and child.cgroups.has_memory:
            try:
                capped = child.cgroups.set_memory_limit(key.memory_mib * 1024 * 1024)
            except OSError as exc:
                raise WorkerError(host_resource_error(exc)) from exc
            if not capped:
                enforcement["memory"] = _worse(
                    enforcement["memory"], "partial", "could not write the cgroup memory limit"
                )
        why = await child.apply_limits(
            cpu_seconds=key.cpu_seconds,
            # Under a cgroup limit a backstop as far above it as RLIMIT_AS: the OOM kill stays
            # what ends a run at its memory limit.
            data_mib=key.memory_mib + 1024 if capped else key.memory_mib,
            as_mib=key.memory_mib + 1024,
        )
        if self.containment.rlimits and why:
            why = f"rlimits not applied: {why}"
            enforcement["cpu"] = Enforcement(level="none", mechanism="none", gap=why)
            if not capped:
                enforcement["memory"] = _worse(enforcement["memory"], "none", why)
        return enforcement

    async def _prime(self, entry: _Entry) -> None:
        child = entry.child
        try:
            with anyio.fail_after(SPAWN_TIMEOUT_S):
                await child.handshake(SPAWN_TIMEOUT_S)
                if entry.key is not None:
                    entry.enforcement = await self.limit(child, entry.key)
                    await child.preload_sdk(entry.key.sdk_module)
        except TimeoutError:
            entry.error = WorkerError("a pooled child was not primed in time")
        except WorkerError as exc:
            entry.error = exc
            # Not started, or started and then not primed (the host out of descriptors):
            # either way the refill backs off, or a run taking from the pool would find
            # one failed child after another until its wall clock ran out.
            self._start_failed(exc)
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            entry.error = WorkerError(f"could not prime a pooled child: {exc!r}")
        finally:
            entry.primed.set()

    # --- the pool ---------------------------------------------------------------------

    async def fill(self) -> None:
        """Top the pool up and wait until every pooled child is primed (or failed)."""
        await self.chores.wait()
        self.check_refused()
        await self._top_up()
        for entry in list(self._pool):
            await entry.primed.wait()  # primed by a chore (or inline), never twice at once
            if entry.error is not None:
                self._pool.remove(entry)
                await entry.child.close(self.janitor)
                raise entry.error

    async def _top_up(self) -> None:
        if not self.zygote.alive():
            pool, self._pool = self._pool, []
            self._doomed.extend(e.child for e in pool)  # a dead zygote's: closed at the next take
        key = self._last_key
        for entry in self._pool:
            if entry.key is None and key is not None and entry.primed.is_set() and not entry.error:
                # A child warmed up before any run: prime it for the key in use now.
                entry.key, entry.primed = key, anyio.Event()
                await self._start_priming(entry)
        while len(self._pool) < self.containment.pool_size and not self.closed:
            if time.monotonic() < self._refill_after:
                return  # children failed to start just now: not again at once
            entry = _Entry(await self.request(key), key)
            self._pool.append(entry)
            await self._start_priming(entry)

    async def _start_priming(self, entry: _Entry) -> None:
        if not self.chores.start(functools.partial(self._prime, entry), "priming"):
            await self._prime(entry)

    def refill_soon(self) -> None:
        """Top the pool up in the background (inline where there are no chores)."""
        if self._refilling or self.closed:
            return

        async def refill() -> None:
            try:
                with contextlib.suppress(WorkerError):
                    await self._top_up()
            finally:
                self._refilling = False

        self._refilling = True
        if not self.chores.start(refill, "refill"):
            self._refilling = False

    async def take(self, key: RunKey) -> tuple[ChildHandle, dict[Dimension, Enforcement] | None]:
        """A child for one run of ``key``, never used before and removed from the pool.

        With an enforcement report: primed for ``key`` (limits applied, SDK loaded). With
        ``None``: unprimed; the caller applies the limits and sends the SDK in ``start``.
        Raises ``WorkerError`` when no child can be had."""
        self._last_key = key
        self.check_refused()
        for doomed in self._doomed:
            await doomed.close(self.janitor)
        self._doomed.clear()
        if not self.zygote.alive() and self._pool:
            await self._top_up()  # moves a dead zygote's children out
        while True:
            entry = next((e for e in self._pool if e.key == key), None)
            if entry is None and key.scratch_mib == DEFAULT_SCRATCH_MIB:
                entry = next((e for e in self._pool if e.key is None), None)
            if entry is None:
                break
            self._pool.remove(entry)
            if not self._pool:
                self.refill_soon()
            try:
                await entry.primed.wait()  # priming is bounded by SPAWN_TIMEOUT_S
            except BaseException:  # the run's wall clock or a cancellation: not taken
                self._retire(entry)
                raise
            child = entry.child
            alive = child.ready and child.alive() and child.keeper.exit is None and not child.closed
            if entry.error is None and alive:
                return child, entry.enforcement
            await child.close(self.janitor)
        if self._pool:
            # Only children primed for other keys: retire the oldest, so the refill
            # shifts the pool toward the keys in use.
            self._retire(self._pool.pop(0))
        self.refill_soon()
        return await self.spawn(key), None

    def _retire(self, entry: _Entry) -> None:
        """Close a pooled child in the background once its priming is over."""

        async def retire() -> None:
            await entry.primed.wait()
            await entry.child.close(self.janitor)

        if not self.chores.start(retire, "teardown"):
            self._doomed.append(entry.child)  # closed at the next take

    async def release(self, child: ChildHandle, *, finished: bool) -> None:
        """A run is over with ``child``. ``finished`` (it sent ``done`` and closed its
        channel): the tree is killed now and confirmed gone in the background. Otherwise
        (killed for a limit, a breach, abort, cancellation) confirmed before returning."""
        if finished:

            async def teardown() -> None:
                await child.close(self.janitor)
                self.refill_soon()

            child.signal_kill()
            if not self._pool:
                # Runs come faster than children: the replacement is asked for now, not
                # after the teardown. (Otherwise later: the refill's work on the event
                # loop then never delays the result of the run that just ended.)
                self.refill_soon()
            if self.chores.start(teardown, "teardown"):
                return
        await child.close(self.janitor)
        self.refill_soon()

    async def aclose(self) -> None:
        self.closed = True
        with anyio.CancelScope(shield=True):
            # A child being primed may wait seconds for its hello when the zygote has a
            # burst of requests queued: it is closed below instead (the teardowns run on).
            self.chores.cancel("priming")
            await self.chores.wait()
            pool, self._pool = self._pool, []
            for entry in pool:
                await entry.child.close()  # one still starting is ended by its channels
            for child in self._doomed:
                await child.close()
            self._doomed.clear()
            # Off the event loop: a zygote that still forks children for requests queued
            # before the goodbye (a burst of starts cut short) takes up to its bound.
            await anyio.to_thread.run_sync(self.zygote.stop)
            remove_scratch(self.root)
            await anyio.to_thread.run_sync(self.janitor.close)
