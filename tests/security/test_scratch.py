"""The scratch quota: all files in the scratch dir together stay within
``Limits.scratch_mib`` (a size-limited tmpfs in the child's own mount namespace), a full
scratch dir is an ``OSError`` (ENOSPC) inside the program, and what it holds is memory
charged to the run's memory cgroup. Real contained children, and the mechanism alone as
uid 65534 in a user namespace (the unprivileged path)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator

import pytest

from tests.security._support import run
from worker import Containment, Limits
from worker._host._backend import SubprocessBackend
from worker._kernel import _syscalls
from worker._supervisor import _scratch

pytestmark = pytest.mark.anyio

FILL = (
    "import errno\nwritten = 0\ntry:\n    for i in range({files}):\n"
    "        with open(f'f{{i}}', 'wb') as f:\n"
    "            for _ in range({chunks}):\n"
    "                f.write(b'x' * (1 << 20))\n                written += 1\n"
    "except OSError as e:\n    return [written, errno.errorcode.get(e.errno)]\n"
    "return [written, None]"
)


@pytest.fixture
async def backend() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend(Containment(pool_size=1)) as b:
        yield b


async def test_all_files_together_stay_within_scratch_mib(backend: SubprocessBackend) -> None:
    # 40 files of 8 MiB, each far under the per-file 64 MiB RLIMIT_FSIZE.
    limits = Limits(wall_seconds=20, memory_mib=512, scratch_mib=64)
    out = await run(backend, FILL.format(files=40, chunks=8), limits)
    assert out.ok, out.detail
    written_mib, error = out.value
    assert error == "ENOSPC"
    assert 48 <= written_mib <= 64
    assert "scratch tmpfs quota" in out.enforcement["filesystem"].mechanism
    assert "scratch quota not applied" not in out.enforcement["filesystem"].gap
    assert (await run(backend, "return 'host fine'")).value == "host fine"


async def test_each_run_gets_its_own_quota(backend: SubprocessBackend) -> None:
    # A child made before any run is resized when primed; later ones are made at the size
    # of the runs in use; a change of size is served by a child made for it.
    for mib in (8, 24, 8, 8, 24):
        limits = Limits(wall_seconds=20, memory_mib=256, scratch_mib=mib)
        out = await run(backend, FILL.format(files=1, chunks=64), limits)
        assert out.ok, out.detail
        assert out.value[1] == "ENOSPC" and mib - 2 <= out.value[0] <= mib
        assert "scratch quota not applied" not in out.enforcement["filesystem"].gap


async def test_scratch_files_are_charged_to_the_memory_cgroup(backend: SubprocessBackend) -> None:
    limits = Limits(wall_seconds=20, memory_mib=512, scratch_mib=256)
    out = await run(backend, FILL.format(files=3, chunks=50), limits)
    assert out.ok and out.value == [150, None], out
    peak = out.stats.peak_memory_kib
    assert peak is not None and peak >= 150 * 1024  # the tmpfs pages, charged to the run


async def test_scratch_beyond_memory_is_a_memory_limit(backend: SubprocessBackend) -> None:
    limits = Limits(wall_seconds=20, memory_mib=64, scratch_mib=256)
    out = await run(backend, FILL.format(files=4, chunks=50), limits)
    assert out.kind == "memory-limit", out
    assert (await run(backend, "return 'host fine'")).value == "host fine"


def _tmpfs_as_nobody(scratch: str) -> dict[str, object]:
    """In a forked process: become uid 65534, make user + mount namespaces, mount the
    scratch tmpfs the way a child does on an unprivileged host, and fill it."""
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    _syscalls.unshare(_syscalls.CLONE_NEWUSER | _syscalls.CLONE_NEWNS)
    _syscalls.map_own_ids(65534, 65534)
    error = _scratch.mount_scratch(scratch, 4, uid=65534, gid=65534)
    if error:
        return {"mount": error}
    written = 0
    try:
        with open(os.path.join(scratch, "f"), "wb") as fh:
            for _ in range(8):
                fh.write(b"x" * (1 << 20))
                fh.flush()
                written += 1
    except OSError as exc:
        return {"written": written, "errno": exc.errno}
    return {"written": written, "errno": None}


def test_the_quota_works_unprivileged_in_a_user_namespace() -> None:
    scratch = tempfile.mkdtemp(prefix="ptc-test-scratch-")  # under /tmp: nobody can reach it
    os.chown(scratch, 65534, 65534)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            result = _tmpfs_as_nobody(scratch)
        except BaseException as exc:  # report, never hang the parent
            result = {"error": repr(exc)}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        facts = json.loads(fh.read())
    os.waitpid(pid, 0)
    try:
        assert facts["errno"] == errno.ENOSPC, facts
        assert 3 <= facts["written"] <= 4  # a 4 MiB tmpfs, written 1 MiB at a time
        assert os.listdir(scratch) == []  # the tmpfs was in the namespace only
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_map_own_ids_refuses_root() -> None:
    with pytest.raises(OSError, match="refusing to map root"):
        _syscalls.map_own_ids(0, 0)
