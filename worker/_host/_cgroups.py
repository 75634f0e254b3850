"""Per-run cgroups, managed from the host: v1 memory (+memsw) and pids; v2 for ``cgroup.kill``
and, where the host's cgroup hands them to its children, v2 ``memory.max`` and ``pids.max``.

Each run's cgroups nest under the host process's own cgroup path for that hierarchy (read
from ``/proc/self/cgroup``; this machine is hybrid v1/v2 and the host may not sit at a
hierarchy root). The child's keeper process joins them before it drops privileges, so the
whole tree inherits them. Every step is optional and detected, never assumed: a controller
that is missing or a directory that is not writable (read-only in a container, not
delegated to a non-root user) yields no cgroup, and :attr:`RunCgroups.note` says why, for
the enforcement report.

cgroup v2 lets a cgroup hand controllers to its children only while it holds no process
itself, so a host that runs alone in a delegated cgroup (``systemd-run --user --scope -p
Delegate=yes``, a container's own cgroup namespace) is first moved into a leaf of it
(``ptc-host``), once, as nsjail does; a cgroup that holds other processes is left alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import threading
import time
from dataclasses import dataclass, field

from .._kernel._syscalls import read_file, remove_cgroup, write_file

CGROUP_ROOT = "/sys/fs/cgroup"
PIDS_MAX = 64
V2_CONTROLLERS = ("memory", "pids")
HOST_LEAF = "ptc-host"


_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE)


def _own_paths() -> dict[str, str]:
    """Map hierarchy -> this process's path in it (``"unified"`` for cgroup v2)."""
    paths: dict[str, str] = {}
    try:
        lines = _read("/proc/self/cgroup").splitlines()
    except OSError as exc:
        if exc.errno in _OUT_OF_FDS:
            raise
        return paths
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            paths["unified"] = path
        for name in controllers.split(","):
            paths[name] = path
    return paths


def _base_dir(hierarchy: str, own: dict[str, str]) -> str | None:
    if hierarchy not in own:
        return None
    mount = os.path.join(CGROUP_ROOT, hierarchy)
    if hierarchy == "unified" and not os.path.exists(os.path.join(mount, "cgroup.procs")):
        # A pure v2 host mounts the unified hierarchy at the root itself.
        mount = CGROUP_ROOT
    base = os.path.join(mount, own[hierarchy].lstrip("/"))
    return base if os.path.isdir(base) else None


def _why(exc: OSError, where: str) -> str:
    """A cgroup step failed: why, in words that say what the host can do."""
    if exc.errno == errno.EROFS:
        return f"{CGROUP_ROOT} is read-only (a container's default): nothing to nest under"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (
            f"{where} is not writable by uid {os.geteuid()} (no cgroup delegated to it: "
            "systemd-run --user --scope -p Delegate=yes, or a container's own cgroup)"
        )
    return f"{where}: {exc.strerror or exc}"


def _controllers(folder: str, name: str) -> set[str]:
    try:
        return set(_read(os.path.join(folder, name)).split())
    except OSError:
        return set()


_delegated: dict[str, str] = {}
"""v2 base dir -> "" once its children get the controllers, else why not (per process)."""


def _hand_down(base: str) -> str:
    """Make the v2 controllers available to ``base``'s children: "" or why not.

    Enabling them needs ``base`` to hold no process; a host alone in it moves itself into a
    leaf first (once per process)."""
    if base in _delegated:
        return _delegated[base]
    wanted = set(V2_CONTROLLERS) & _controllers(base, "cgroup.controllers")
    why = ""
    if not wanted:
        why = "the host's cgroup v2 has no memory or pids controller to hand down"
    elif not wanted <= _controllers(base, "cgroup.subtree_control"):
        why = _enable(base, wanted)
    _delegated[base] = why
    return why


def _enable(base: str, wanted: set[str]) -> str:
    control = os.path.join(base, "cgroup.subtree_control")
    change = " ".join(f"+{c}" for c in sorted(wanted))
    try:
        _write(control, change)
        return ""
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            return _why(exc, control)
    try:
        procs = {int(p) for p in _read(os.path.join(base, "cgroup.procs")).split()}
    except (OSError, ValueError) as exc:
        return f"cannot read {base}/cgroup.procs: {exc}"
    if procs != {os.getpid()}:
        return (
            f"the host's cgroup v2 holds {len(procs)} processes, so it cannot hand the memory "
            "controller to children: start the host alone in a delegated cgroup"
        )
    leaf = os.path.join(base, HOST_LEAF)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(leaf)
        _write(os.path.join(leaf, "cgroup.procs"), "0")
        _write(control, change)
    except OSError as exc:
        return _why(exc, base)
    return ""


def _v2_setup(path: str, *, pids_done: bool) -> tuple[str, ...]:
    """A new v2 run cgroup: the controllers it has; ``pids.max`` set (unless v1 did)."""
    have = _controllers(path, "cgroup.controllers")
    if "pids" in have and not pids_done:
        _write(os.path.join(path, "pids.max"), str(PIDS_MAX))
    return tuple(c for c in V2_CONTROLLERS if c in have)


def hierarchy_bases() -> list[str]:
    """The directories runs' cgroups are made in (this process's own, per hierarchy)."""
    own = _own_paths()
    return [b for h in ("memory", "pids", "unified") if (b := _base_dir(h, own)) is not None]


def remove_abandoned(path: str) -> None:
    """Kill whatever is left in a cgroup nobody owns any more, and remove it."""
    with contextlib.suppress(OSError):
        _write(os.path.join(path, "cgroup.kill"), "1")
    with contextlib.suppress(OSError):
        for pid in _read(os.path.join(path, "cgroup.procs")).split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), 9)
    remove_cgroup(path)


# A handful of these per run, so without file objects (half the time of ``open()``).
_write = write_file
_read = read_file


@dataclass
class RunCgroups:
    """The cgroup directories of one run (any of them may be ``None``)."""

    memory: str | None = None
    pids: str | None = None
    unified: str | None = None
    memsw: bool = False
    v2_controllers: tuple[str, ...] = ()
    """Controllers the v2 cgroup (``unified``) has: ``memory``, ``pids``."""
    note: str = ""
    """Why there is no memory cgroup ("" when there is one)."""
    _oom_at_start: int = field(default=0, repr=False)
    _limit: int = field(default=1 << 62, repr=False)
    """The memory limit last written (a new cgroup's is unlimited)."""

    @classmethod
    def create(cls, name: str) -> RunCgroups:
        """Create what this host allows; never raises for an unsupported controller.

        ``OSError`` (and nothing left behind) when the host process is out of file
        descriptors: that is not a missing controller, and the run must not go on
        believing it is."""
        own = _own_paths()
        made = cls()
        notes: list[str] = []
        for hierarchy in ("memory", "pids", "unified"):
            base = _base_dir(hierarchy, own)
            if base is None:
                continue
            path = os.path.join(base, name)
            try:
                if hierarchy == "unified":
                    handed = _hand_down(base)
                    if handed:
                        notes.append(handed)
                os.mkdir(path)
                if hierarchy == "pids":
                    _write(os.path.join(path, "pids.max"), str(PIDS_MAX))
                if hierarchy == "unified":
                    if not os.path.exists(os.path.join(path, "cgroup.kill")):
                        os.rmdir(path)  # Linux < 5.14: a v2 cgroup is of no use here
                        continue
                    made.v2_controllers = _v2_setup(path, pids_done=made.pids is not None)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
                if exc.errno in _OUT_OF_FDS:
                    made.remove()
                    raise
                notes.append(_why(exc, base))
                continue
            setattr(made, hierarchy, path)
        if made.memory is not None:
            made.memsw = os.path.exists(os.path.join(made.memory, "memory.memsw.limit_in_bytes"))
        if not made.has_memory:
            unique = list(dict.fromkeys(notes))  # v1 and v2 can both say why
            made.note = "; ".join(unique) if unique else "no memory controller on this host"
        return made

    @property
    def has_memory(self) -> bool:
        """Whether a memory limit can be set (v1 memory, or v2 with the memory controller)."""
        return self.memory is not None or (
            self.unified is not None and "memory" in self.v2_controllers
        )

    def _v2(self, name: str) -> str | None:
        """A file of the v2 cgroup's memory controller, when it has one."""
        if self.unified is None or "memory" not in self.v2_controllers:
            return None
        return os.path.join(self.unified, name)

    def set_memory_limit(self, limit_bytes: int) -> bool:
        """Apply the memory limit (and memsw / swap.max, so swap cannot extend it). False
        if it failed; ``OSError`` when the host process is out of file descriptors, which
        says nothing of what the host's cgroups can do (the caller says what it is)."""
        try:
            if self.memory is not None:
                limit = os.path.join(self.memory, "memory.limit_in_bytes")
                memsw = os.path.join(self.memory, "memory.memsw.limit_in_bytes")
                # memsw may never be below the memory limit: raising a limit a kept cgroup
                # had lower, memsw goes first; lowering it, the memory limit does.
                order = [memsw, limit] if self.memsw and self._limit < limit_bytes else [limit]
                if self.memsw and order == [limit]:
                    order.append(memsw)
                for path in order:
                    _write(path, str(limit_bytes))
                self._limit = limit_bytes
            elif (v2 := self._v2("memory.max")) is not None:
                _write(v2, str(limit_bytes))
                swap = self._v2("memory.swap.max")
                if swap is not None and os.path.exists(swap):
                    _write(swap, "0")
            else:
                return False
            self._oom_at_start = self.oom_kills()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                raise
            return False
        return True

    def oom_kills(self) -> int:
        """The cgroup's OOM-kill counter (0 when unknown)."""
        if self.memory is not None:
            path = os.path.join(self.memory, "memory.oom_control")
        elif (v2 := self._v2("memory.events")) is not None:
            path = v2
        else:
            return 0
        try:
            for line in _read(path).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def oom_killed(self) -> bool:
        """True when the kernel's OOM killer fired in this run's memory cgroup."""
        return self.oom_kills() > self._oom_at_start

    def peak_memory_kib(self) -> int | None:
        """The run's peak memory as the cgroup counted it; ``None`` without one (or on a
        v2 kernel older than 5.19, which has no ``memory.peak``)."""
        if self.memory is not None:
            path = os.path.join(self.memory, "memory.max_usage_in_bytes")
        elif (v2 := self._v2("memory.peak")) is not None:
            path = v2
        else:
            return None
        try:
            return int(_read(path)) // 1024
        except (OSError, ValueError):
            return None

    @property
    def reusable(self) -> bool:
        """Whether these cgroups can serve another run once emptied: every counter a run
        reads can be started again (v1 memory's peak can be reset; v2's ``memory.peak`` only
        for one reader, so a v2 memory cgroup is never reused)."""
        made = self.memory is not None or self.pids is not None or self.unified is not None
        return made and "memory" not in self.v2_controllers

    def reset(self) -> bool:
        """Make emptied cgroups ready for another run: nothing left in them (checked, never
        assumed) and the peak started again. False when they cannot serve one."""
        if not self.reusable or self.populated():
            return False
        try:
            if self.memory is not None:
                _write(os.path.join(self.memory, "memory.max_usage_in_bytes"), "0")
                if self.memsw:
                    _write(os.path.join(self.memory, "memory.memsw.max_usage_in_bytes"), "0")
        except OSError:
            return False
        return True

    def kill(self) -> bool:
        """``cgroup.kill`` the whole tree (v2). False when there is no v2 cgroup."""
        if self.unified is None:
            return False
        try:
            _write(os.path.join(self.unified, "cgroup.kill"), "1")
        except OSError:
            return False
        return True

    def populated(self) -> bool:
        """True while any process is still in one of the run's cgroups."""
        if self.unified is not None:
            with contextlib.suppress(OSError):
                return "populated 1" in _read(os.path.join(self.unified, "cgroup.events"))
        for path in (self.pids, self.memory):
            if path is not None:
                with contextlib.suppress(OSError):
                    return _read(os.path.join(path, "cgroup.procs")).strip() != ""
        return False

    def remove(self, timeout_s: float = 1.0) -> None:
        """Remove the directories (retrying briefly while the last exits are accounted)."""
        deadline = time.monotonic() + timeout_s
        for attr in ("memory", "pids", "unified"):
            path = getattr(self, attr)
            if path is None:
                continue
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.001)
            setattr(self, attr, None)


class CgroupJanitor:
    """Keeps finished runs' cgroups for the next runs, or removes them on a helper thread.

    Making and removing three cgroups per run costs about 0.6 ms of CPU here, and ``rmdir``
    of a just-emptied cgroup blocks for 5-20 ms while the kernel offlines it: a run's
    cgroups, once empty and reset (:meth:`RunCgroups.reset`), serve a later run
    (:meth:`take`; at most :data:`KEPT` wait); a cgroup with anything left in it never does:
    it is removed, off the event loop. :meth:`discard`
    (on the event loop) and :meth:`close` (on a worker thread, while chores may still
    discard) may race: each helper thread has its own queue, published only once started,
    so a close never joins a thread that has not started and a discard after a close
    starts a new one instead of queueing behind the old one's end.
    """

    KEPT = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._worker: tuple[threading.Thread, queue.SimpleQueue[RunCgroups | None]] | None = None
        self._kept: list[RunCgroups] = []

    def take(self, name: str) -> RunCgroups:
        """Cgroups for a new child: emptied ones kept from an earlier run, else new ones
        called ``name`` (see :meth:`RunCgroups.create`)."""
        if self._kept:
            return self._kept.pop()
        return RunCgroups.create(name)

    def recycle(self, cgroups: RunCgroups) -> None:
        """A child is gone: keep its cgroups for a later run if they are empty and can be
        reset, else remove them."""
        if len(self._kept) < self.KEPT and cgroups.reset():
            self._kept.append(cgroups)
        else:
            self.discard(cgroups)

    def discard(self, cgroups: RunCgroups) -> None:
        if cgroups.memory is None and cgroups.pids is None and cgroups.unified is None:
            return
        with self._lock:
            if self._worker is None:
                work: queue.SimpleQueue[RunCgroups | None] = queue.SimpleQueue()
                thread = threading.Thread(
                    target=self._work, args=(work,), name="ptc-cgroup-janitor", daemon=True
                )
                thread.start()
                self._worker = (thread, work)
            self._worker[1].put(cgroups)

    def close(self) -> None:
        """Remove the kept cgroups, finish every pending removal and stop the thread."""
        kept, self._kept = self._kept, []
        for cgroups in kept:
            self.discard(cgroups)
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            thread, work = worker
            work.put(None)
            thread.join()

    @staticmethod
    def _work(work: queue.SimpleQueue[RunCgroups | None]) -> None:
        while (cgroups := work.get()) is not None:
            cgroups.remove(timeout_s=5.0)
