"""Nothing outlives its host, whenever it dies (issue 31, items 1 and 2): a host killed while
children are being started leaves nothing once its zygote is gone and the next runtime has
started (the zygote removes what every child and every queued request had; a cgroup the host
made for a request it had not sent yet is the next runtime's to remove), and what a host and
its zygote dying together leave is removed by the next runtime on the machine, never what a
live host owns.

Each test runs its hosts in a private temp dir (their scratch roots are made there) and
counts only what carries the marks of the hosts it started itself: their pids in the
names of scratch roots and cgroups."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from worker._host._cgroups import hierarchy_bases
from worker._host._leftovers import host_mark, sweep_dead_hosts

pytestmark = pytest.mark.needs_root

BURST = """
import asyncio, sys
from worker import Containment, Limits, RunRequest, SubprocessBackend

async def no_calls(calls):
    raise AssertionError

async def main() -> None:
    backend = SubprocessBackend(Containment(require=frozenset(), pool_size=2))
    await backend.start()
    print(backend.zygote_pid, flush=True)
    request = RunRequest(code="import time\\ntime.sleep(30)", sdk_module="", limits=Limits())
    await asyncio.gather(*(backend.run(request, on_calls=no_calls) for _ in range(40)))

asyncio.run(main())
"""


def _theirs(host: int, tmp: Path) -> list[str]:
    """What host ``host`` left: its scratch roots in ``tmp`` and its run cgroups."""
    found = [p.name for p in tmp.iterdir() if p.name.startswith(f"ptc-{host}-")]
    for base in hierarchy_bases():
        found += [n for n in os.listdir(base) if n.startswith(f"ptc-{host}-")]
    return found


def _start(tmp: Path) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    host = subprocess.Popen(
        [sys.executable, "-c", BURST], env=env, stdout=subprocess.PIPE, text=True
    )
    assert host.stdout is not None
    return host, int(host.stdout.readline())


def _wait_gone(pid: int) -> bool:
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([pidfd], [], [], 30)[0])
    finally:
        os.close(pidfd)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.1])
def test_a_host_that_dies_while_children_start_leaves_nothing(
    tmp_path: Path, how: str, after_s: float
) -> None:
    # 40 runs are being started when the host dies: some children are forked, some are
    # being set up, some requests still wait on the zygote's control socket.
    host, zygote = _start(tmp_path)
    try:
        if after_s:
            select.select([], [], [], after_s)
    finally:
        host.send_signal(getattr(signal, how))
        host.wait()
        assert host.stdout is not None
        host.stdout.close()
    assert _wait_gone(zygote), "the zygote outlived its host"
    assert [n for n in _theirs(host.pid, tmp_path) if (tmp_path / n).exists()] == []
    sweep_dead_hosts(str(tmp_path))  # as the next runtime does when it starts
    assert _theirs(host.pid, tmp_path) == []


@pytest.mark.slow
def test_what_a_host_and_its_zygote_left_together_goes_with_the_next_runtime(
    tmp_path: Path,
) -> None:
    dead, zygote = _start(tmp_path)
    select.select([], [], [], 0.5)
    os.kill(zygote, signal.SIGKILL)  # as a container-wide SIGKILL does: nobody cleans up
    dead.kill()
    dead.wait()
    assert dead.stdout is not None
    dead.stdout.close()
    assert _wait_gone(zygote)
    left = _theirs(dead.pid, tmp_path)
    assert left, "nothing to clean up: the test proves nothing"
    # A live host's own are never touched: this process is one (its mark is its own).
    mine = tmp_path / f"{host_mark()}-test"
    mine.mkdir()
    removed = sweep_dead_hosts(str(tmp_path))
    assert _theirs(dead.pid, tmp_path) == [], removed
    assert mine.exists()
