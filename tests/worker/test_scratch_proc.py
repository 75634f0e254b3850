"""What the keeper reads of its child's /proc: open files by the mount they belong to, the
files it maps, its memory; and blindness (a process it may not look at) raised, never
guessed around, while a process or fd that is gone holds nothing."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from worker._supervisor import _scratch_proc
from worker._supervisor._scratch_proc import Blind, ScratchMount

NOBODY = 65534


def test_a_file_belongs_to_the_scratch_dir_by_its_mount(tmp_path: Path) -> None:
    mount = ScratchMount(str(tmp_path))
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    try:
        os.write(fd, b"x" * 10)
        found = _scratch_proc.open_file(os.getpid(), fd)
        assert found is not None and found.regular and found.writable
        assert found.mnt_id == mount.mnt_id
        assert found.flags & os.O_APPEND and found.pos == 10
        assert found.key == (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
        assert fd in {f.fd for f in _scratch_proc.open_files(os.getpid())}
    finally:
        os.close(fd)
    assert _scratch_proc.open_file(os.getpid(), fd) is None  # closed: nothing held


def test_read_only_and_path_fds_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    for flags in (os.O_RDONLY, os.O_PATH):
        fd = os.open(tmp_path / "f", flags)
        try:
            found = _scratch_proc.open_file(os.getpid(), fd)
            assert found is not None and not found.writable
        finally:
            os.close(fd)


def test_a_mapped_file_is_found_by_its_inode(tmp_path: Path) -> None:
    mount = ScratchMount(str(tmp_path))
    path = tmp_path / "m"
    path.write_bytes(b"x" * mmap.PAGESIZE)
    with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), mmap.PAGESIZE) as mapping:
        mapping[0] = 1
        inodes = _scratch_proc.mapped(os.getpid(), mount)
    assert inodes.get(path.stat().st_ino) is True


def test_memory_reads_what_is_there_and_none_where_nothing_is() -> None:
    data = b"ptc-scratch-proc"
    buffer = ctypes.create_string_buffer(data)
    address = ctypes.addressof(buffer)
    assert _scratch_proc.read_memory(os.getpid(), address, len(data)) == data
    assert _scratch_proc.read_memory(os.getpid(), 0, 8) is None  # unmapped: EFAULT's case


def _as_nobody(look: Callable[[int], object]) -> str:
    """``look(pid of this test)`` in a forked process as uid 65534: what it raised."""
    target = os.getpid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            look(target)
            found = "no error"
        except Blind as exc:
            found = f"Blind: {exc}"
        except BaseException as exc:
            found = repr(exc)
        os.write(write, json.dumps(found).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        raised: str = json.loads(fh.read())
    os.waitpid(pid, 0)
    return raised


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another uid")
@pytest.mark.parametrize(
    ("look", "what"),
    [
        (_scratch_proc.open_files, "cannot list /proc/"),
        (lambda pid: _scratch_proc.open_file(pid, 0), "cannot stat /proc/"),
        (lambda pid: _scratch_proc.read_memory(pid, 0, 8), "cannot open /proc/"),
        (lambda pid: _scratch_proc.mapped(pid, ScratchMount("/tmp")), "cannot read /proc/"),
    ],
    ids=["fds", "one-fd", "memory", "maps"],
)
def test_a_process_it_may_not_look_at_is_blindness(
    look: Callable[[int], object], what: str
) -> None:
    found = _as_nobody(look)
    assert found.startswith(f"Blind: {what}") and "Permission denied" in found, found


def test_a_process_that_is_gone_holds_nothing(tmp_path: Path) -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert _scratch_proc.open_files(pid) == []
    assert _scratch_proc.open_file(pid, 0) is None
    assert _scratch_proc.mapped(pid, ScratchMount(str(tmp_path))) == {}
