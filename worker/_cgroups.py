"""Per-run cgroups, managed from the host: v1 memory (+memsw) and pids, v2 for ``cgroup.kill``.

Each run's cgroups nest under the host process's own cgroup path for that hierarchy (read
from ``/proc/self/cgroup``; this machine is hybrid v1/v2 and the host may not sit at a
hierarchy root). The child's keeper process joins them before it drops privileges, so the
whole tree inherits them. Every step is optional: a controller that is missing or not
writable simply yields no directory, and the enforcement report says so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import threading
import time
from dataclasses import dataclass, field

CGROUP_ROOT = "/sys/fs/cgroup"
PIDS_MAX = 64


_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE)


def _own_paths() -> dict[str, str]:
    """Map hierarchy -> this process's path in it (``"unified"`` for cgroup v2)."""
    paths: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            lines = fh.read().splitlines()
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


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(value)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as fh:
        return fh.read()


@dataclass
class RunCgroups:
    """The cgroup directories of one run (any of them may be ``None``)."""

    memory: str | None = None
    pids: str | None = None
    unified: str | None = None
    memsw: bool = False
    _oom_at_start: int = field(default=0, repr=False)

    @classmethod
    def create(cls, name: str) -> RunCgroups:
        """Create what this host allows; never raises for an unsupported controller.

        ``OSError`` (and nothing left behind) when the host process is out of file
        descriptors: that is not a missing controller, and the run must not go on
        believing it is."""
        own = _own_paths()
        made = cls()
        for hierarchy in ("memory", "pids", "unified"):
            base = _base_dir(hierarchy, own)
            if base is None:
                continue
            path = os.path.join(base, name)
            try:
                os.mkdir(path)
                if hierarchy == "pids":
                    _write(os.path.join(path, "pids.max"), str(PIDS_MAX))
                if hierarchy == "unified" and not os.path.exists(os.path.join(path, "cgroup.kill")):
                    os.rmdir(path)
                    continue
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
                if exc.errno in _OUT_OF_FDS:
                    made.remove()
                    raise
                continue
            setattr(made, hierarchy, path)
        if made.memory is not None:
            made.memsw = os.path.exists(os.path.join(made.memory, "memory.memsw.limit_in_bytes"))
        return made

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes ``0`` into to join every cgroup."""
        return [
            os.path.join(p, "cgroup.procs") for p in (self.memory, self.pids, self.unified) if p
        ]

    def set_memory_limit(self, limit_bytes: int) -> bool:
        """Apply the memory limit (and memsw, so swap cannot extend it). False if it failed."""
        if self.memory is None:
            return False
        try:
            _write(os.path.join(self.memory, "memory.limit_in_bytes"), str(limit_bytes))
            if self.memsw:
                _write(os.path.join(self.memory, "memory.memsw.limit_in_bytes"), str(limit_bytes))
            self._oom_at_start = self.oom_kills()
        except OSError:
            return False
        return True

    def oom_kills(self) -> int:
        """The cgroup's OOM-kill counter (0 when unknown)."""
        if self.memory is None:
            return 0
        try:
            for line in _read(os.path.join(self.memory, "memory.oom_control")).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def oom_killed(self) -> bool:
        """True when the kernel's OOM killer fired in this run's memory cgroup."""
        return self.oom_kills() > self._oom_at_start

    def peak_memory_kib(self) -> int:
        if self.memory is None:
            return 0
        try:
            return int(_read(os.path.join(self.memory, "memory.max_usage_in_bytes"))) // 1024
        except (OSError, ValueError):
            return 0

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
    """Removes finished runs' cgroups on a helper thread.

    ``rmdir`` of a just-emptied cgroup blocks for 5-20 ms here while the kernel offlines
    it; doing it off the event loop keeps that out of every run's latency.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[RunCgroups | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def discard(self, cgroups: RunCgroups) -> None:
        if cgroups.memory is None and cgroups.pids is None and cgroups.unified is None:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="ptc-cgroup-janitor")
            self._thread.daemon = True
            self._thread.start()
        self._queue.put(cgroups)

    def close(self) -> None:
        """Finish every pending removal and stop the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _work(self) -> None:
        while (cgroups := self._queue.get()) is not None:
            cgroups.remove(timeout_s=5.0)
