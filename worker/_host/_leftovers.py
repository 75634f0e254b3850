"""What a host leaves on the machine is marked with the host, so a host that dies without a
word (a container-wide SIGKILL, an OOM kill of the service's cgroup, host and zygote dying
together) is cleaned up after by the next runtime, and a live host's never is.

Every scratch root and run cgroup of a host is named ``ptc-<pid>-<start>-...``: its pid and
its start time (clock ticks since boot, ``/proc/<pid>/stat``), which together name one
process for the machine's uptime (a pid alone may have been reused). At start a pool removes
every such directory in the temp dir and every such cgroup beside its own whose host is not
running any more (killing what is left in the cgroup first); its own zygote removes its
host's when the host dies before it (``_supervise``).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile

from .._kernel._syscalls import read_file
from ._cgroups import hierarchy_bases, remove_abandoned
from ._child_handle import remove_scratch

_MARKED = re.compile(r"^ptc-(\d+)-(\d+)-")


def _start_time(pid: int) -> int | None:
    """Process ``pid``'s start time (clock ticks since boot), ``None`` when it is gone."""
    try:
        fields = read_file(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def host_mark() -> str:
    """``ptc-<pid>-<start>``: this host, as its leftovers are named."""
    return f"ptc-{os.getpid()}-{_start_time(os.getpid()) or 0}"


def _abandoned(name: str) -> bool:
    """Whether ``name`` is marked with a host that is not running any more."""
    found = _MARKED.match(name)
    if found is None:
        return False
    pid, start = int(found[1]), int(found[2])
    return _start_time(pid) != start


def sweep_dead_hosts(temp_dir: str | None = None) -> list[str]:
    """Remove what hosts that are gone left in the temp dir (scratch roots of this uid) and
    beside this host's own cgroups; the paths removed."""
    removed = []
    folder = temp_dir or tempfile.gettempdir()
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if (
                    _abandoned(entry.name)
                    and entry.is_dir(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_uid == os.geteuid()
                ):
                    remove_scratch(entry.path)
                    removed.append(entry.path)
    for base in hierarchy_bases():
        with contextlib.suppress(OSError), os.scandir(base) as entries:
            for entry in entries:
                if _abandoned(entry.name) and entry.is_dir(follow_symlinks=False):
                    remove_abandoned(entry.path)
                    removed.append(entry.path)
    return removed
