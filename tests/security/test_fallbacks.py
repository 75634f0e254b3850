"""Each fallback holds its guarantee with the stronger mechanism switched off, as on the hosts
that lack it (this kernel has them all): signals without a pid namespace or Landlock's
signal scope (Landlock capped at ABI 5, as on Linux 6.8); network without a net namespace or
Landlock's TCP rule (ABI 3); processes without a pid namespace or a cgroup; memory without a
memory cgroup (RLIMIT_DATA); the scratch quota without a tmpfs (the keeper's quota)."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.security._support import leftover_descendants, run
from worker import Containment, Limits
from worker._host._backend import SubprocessBackend
from worker._kernel import _landlock

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root]

BARE = Containment(require=frozenset(), namespaces=False, cgroups=False, pool_size=0)
"""No namespaces, no cgroups: E3/E4/E6 as far as this host can be made to look like them."""


@pytest.fixture
def old_landlock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Children use Landlock ABI 5 at most: no signal or abstract-socket scoping."""
    monkeypatch.setattr(_landlock, "ABI_LIMIT", 5)
    yield


@pytest.fixture
async def bare() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend(BARE) as b:
        yield b


@pytest.fixture
def bystander() -> Iterator[int]:
    """A process of the host's uid, outside the sandbox, that no program may signal."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    yield pid
    os.close(write)
    os.waitpid(pid, 0)


def _alive(pid: int) -> bool:
    return os.waitpid(pid, os.WNOHANG) == (0, 0)


SIGNALS = """
import os, errno
out = {}
for name, pid, sig in [('other', %d, 9), ('group', 0, 0), ('everyone', -1, 0),
                       ('its group', -os.getpgrp(), 0), ('itself', os.getpid(), 0)]:
    try:
        os.kill(pid, sig)
        out[name] = 'sent'
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
return out
"""


async def test_signals_reach_only_the_program_without_pid_namespace_or_scope(
    old_landlock: None, bystander: int
) -> None:
    async with SubprocessBackend(BARE) as b:
        out = await run(b, SIGNALS % bystander)
    assert out.ok, out.detail
    assert out.value == {
        "other": "EPERM",
        "group": "EPERM",
        "everyone": "EPERM",
        "its group": "EPERM",
        "itself": "sent",
    }
    assert _alive(bystander)
    processes = out.enforcement["processes"]
    assert processes.level == "full"
    assert "seccomp pid filter" in processes.mechanism
    assert (
        "Landlock scope" not in processes.mechanism and "pid namespace" not in processes.mechanism
    )


async def test_the_control_without_seccomp_does_reach_the_bystander(
    old_landlock: None, bystander: int
) -> None:
    # Shows what the filter above stops: here nothing does (signal 0: only a check).
    import dataclasses

    async with SubprocessBackend(dataclasses.replace(BARE, seccomp=False)) as b:
        out = await run(b, f"import os\nos.kill({bystander}, 0)\nreturn 'reached'")
    assert out.value == "reached"
    assert out.enforcement["processes"].level != "full"


TCP = """
import socket, errno
try:
    socket.create_connection(('127.0.0.1', %d), timeout=1)
except OSError as e:
    return errno.errorcode.get(e.errno, str(e))
return 'connected'
"""


async def test_network_without_netns_or_landlock_tcp_is_seccomp_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_landlock, "ABI_LIMIT", 3)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.setblocking(False)
    try:
        async with SubprocessBackend(BARE) as b:
            out = await run(b, TCP % srv.getsockname()[1])
        assert out.value == "EPERM"
        with pytest.raises(BlockingIOError):
            srv.accept()
    finally:
        srv.close()
    network = out.enforcement["network"]
    assert network.level == "full"
    assert network.mechanism == "seccomp socket()/connect() deny (connected socketpairs only)"


DAEMON = """
import os, time
try:
    if os.fork() == 0:
        os.setsid()
        time.sleep(60)
except OSError as e:
    return e.errno
return 'forked'
"""


async def test_nothing_is_left_without_pid_namespace_or_cgroup(bare: SubprocessBackend) -> None:
    out = await run(bare, DAEMON)
    assert out.value == 1  # EPERM: no process can be made, so killing the child ends the run
    out = await run(bare, "import time\ntime.sleep(60)", Limits(wall_seconds=1))
    assert out.kind == "timeout"
    assert leftover_descendants(bare.zygote_pid or 0) == []
    processes = out.enforcement["processes"]
    assert processes.level == "full" and "zygote kill + reap" in processes.mechanism


BOMB = """
chunks = []
while True:
    chunks.append(bytearray(1 << 20))
"""
MAPPED = """
import mmap
maps = []
while True:
    m = mmap.mmap(-1, 4 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.write(b'x' * (4 << 20))
    maps.append(m)
"""
THREADS = """
import threading
gate = threading.Event()
threads = []
try:
    while True:
        t = threading.Thread(target=gate.wait)
        t.start()
        threads.append(t)
finally:
    gate.set()
"""


@pytest.mark.slow
@pytest.mark.parametrize("memory_mib", [64, 256])
@pytest.mark.parametrize(
    ("program", "kind", "words"),
    [
        (BOMB, "memory-limit", ""),
        (MAPPED, "exception", "OSError: [Errno 12] Cannot allocate memory"),
        (THREADS, "exception", "RuntimeError: can't start new thread"),
    ],
    ids=["heap", "mmap", "threads"],
)
async def test_memory_stays_within_a_quarter_over_without_a_cgroup(
    bare: SubprocessBackend, memory_mib: int, program: str, kind: str, words: str
) -> None:
    out = await run(bare, program, Limits(wall_seconds=20, memory_mib=memory_mib))
    assert out.kind == kind and words in out.detail, out
    peak = out.stats.peak_memory_kib
    assert peak is not None and 0 < peak <= 1.25 * memory_mib * 1024
    memory = out.enforcement["memory"]
    assert memory.level == "full" and memory.mechanism.startswith("RLIMIT_DATA")


SHARED = """
import errno, mmap, os
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = 'made'
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e))
attempt('memfd', lambda: os.memfd_create('x'))
attempt('shared mmap', lambda: mmap.mmap(-1, 1 << 20))
attempt('/dev/shm', lambda: open('/dev/shm/ptc-test', 'wb'))
return out
"""


async def test_memory_that_rlimit_data_cannot_see_is_refused(bare: SubprocessBackend) -> None:
    out = await run(bare, SHARED)
    assert out.value == {"memfd": "EPERM", "shared mmap": "EPERM", "/dev/shm": "EACCES"}


FILL = """
import errno
written = 0
try:
    for i in range({files}):
        with open(f'f{{i}}', 'wb') as f:
            for _ in range({chunks}):
                f.write(b'x' * (1 << 20))
                f.flush()
                written += 1
except OSError as e:
    return [written, errno.errorcode.get(e.errno)]
return [written, None]
"""


async def test_the_keeper_quota_stops_the_scratch_dir_without_a_tmpfs(
    bare: SubprocessBackend,
) -> None:
    limits = Limits(wall_seconds=20, memory_mib=256, scratch_mib=32)
    out = await run(bare, FILL.format(files=40, chunks=4), limits)
    assert out.ok, out.detail
    written, error = out.value
    # Refused after the keeper saw the total pass 32 MiB (it acts after the writes it sees).
    assert error == "EFBIG" and 28 <= written <= 64
    fs = out.enforcement["filesystem"]
    assert fs.level == "partial" and "keeper scratch quota" in fs.mechanism
    # One file can never pass the quota by itself: RLIMIT_FSIZE is the quota.
    out = await run(bare, FILL.format(files=1, chunks=64), limits)
    assert out.value == [32, "EFBIG"]


async def test_peak_memory_is_measured_without_a_cgroup(bare: SubprocessBackend) -> None:
    out = await run(bare, "x = bytearray(40 << 20)\nreturn len(x)")
    assert out.ok, out.detail
    peak = out.stats.peak_memory_kib
    assert peak is not None and peak >= 40 * 1024


async def test_probe_predicts_what_a_run_reports_with_fallbacks_only(
    old_landlock: None, bare: SubprocessBackend
) -> None:
    out = await run(bare, "return 1")
    assert bare.probe() == out.enforcement, (bare.probe(), out.enforcement)


STRICT = Containment(namespaces=False, cgroups=False, pool_size=0)
"""The default requirements (filesystem too) without a mount namespace: the keeper's write
gate, a hard quota without a tmpfs."""


async def test_the_write_gate_is_a_hard_quota_without_a_tmpfs() -> None:
    limits = Limits(wall_seconds=20, memory_mib=256, scratch_mib=32)
    async with SubprocessBackend(STRICT) as b:
        out = await run(b, FILL.format(files=40, chunks=4), limits)
        threads = await run(
            b,
            "import threading\ntry:\n    threading.Thread(target=print).start()\n"
            "except RuntimeError as e:\n    return str(e)\nreturn 'started'",
        )
    assert out.ok, out.detail
    written, error = out.value
    assert error == "ENOSPC" and 28 <= written <= 32  # refused before the write, as a tmpfs
    fs = out.enforcement["filesystem"]
    assert fs.level == "full" and "waits for the keeper's yes" in fs.mechanism
    assert "no threads" in fs.gap
    assert threads.value == "can't start new thread"
    assert "thread deny" in threads.enforcement["processes"].mechanism


async def test_files_the_program_only_reads_do_not_count_against_its_quota() -> None:
    # The interpreter's largest file (libpython, 20+ MiB here) is on the same filesystem as
    # the scratch dir: held open, it is still not the program's to count.
    code = (
        "import glob, os, sys\n"
        "path = max(glob.glob(sys.base_prefix + '/lib/**', recursive=True), key=os.path.getsize)\n"
        "held = open(path, 'rb')\n"
        "with open('f', 'wb') as f:\n    for _ in range(30):\n        f.write(b'x' * (1 << 20))\n"
        "return [os.path.getsize(path) > (8 << 20), len(held.read(16))]"
    )
    limits = Limits(wall_seconds=20, memory_mib=256, scratch_mib=32)
    async with SubprocessBackend(STRICT) as b:
        out = await run(b, code, limits)
    assert out.value == [True, 16], out.detail
