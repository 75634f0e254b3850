"""What each gated call can make the scratch dir take (``_scratch_calls.estimate``), worked
out for calls this test process *could* make on its own fds and memory (never made): the
keeper reads them from /proc as it reads a waiting child's."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker._supervisor._scratch_calls import BLOCK, Charge, estimate, names_existing
from worker._supervisor._scratch_quota import ScratchQuota

MIB = 1 << 20
CAP = 64 * MIB
ME = os.getpid()
_KEEP_SIZE, _PUNCH_HOLE, _COLLAPSE_RANGE, _ZERO_RANGE, _INSERT_RANGE = 1, 2, 8, 0x10, 0x20


@pytest.fixture
def quota(tmp_path: Path) -> Iterator[ScratchQuota]:
    count = ScratchQuota(str(tmp_path), ME, 256 * MIB, refuse_growth=False)
    yield count
    count.close()


@pytest.fixture
def file(tmp_path: Path) -> Iterator[int]:
    """A scratch file of 10 MiB, its first 4 MiB written, its offset at 1 MiB."""
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR, 0o600)
    os.write(fd, b"x" * 4 * MIB)
    os.ftruncate(fd, 10 * MIB)
    os.lseek(fd, MIB, os.SEEK_SET)
    yield fd
    os.close(fd)


def _after(quota: ScratchQuota, name: str, *args: int) -> int | None:
    charge = estimate(quota, ME, name, [*args, *[0] * (6 - len(args))], CAP)
    return None if charge is None else charge.after


def _appending(tmp_path: Path) -> int:
    return os.open(tmp_path / "f", os.O_WRONLY | os.O_APPEND)


def test_a_write_within_the_length_adds_nothing(quota: ScratchQuota, file: int) -> None:
    assert _after(quota, "write", file, 0, MIB) is None  # 1 MiB at offset 1 MiB
    assert _after(quota, "pwrite64", file, 0, MIB, 8 * MIB) is None


def test_a_write_past_the_end_takes_its_end(quota: ScratchQuota, file: int) -> None:
    assert _after(quota, "pwrite64", file, 0, MIB, 12 * MIB) == 13 * MIB + BLOCK
    assert _after(quota, "pwrite64", file, 0, 1, 100 * MIB) == CAP + BLOCK  # RLIMIT_FSIZE


@pytest.mark.parametrize("name", ["write", "pwrite64"])
def test_an_append_lands_at_the_end_whatever_its_offset(
    quota: ScratchQuota, file: int, tmp_path: Path, name: str
) -> None:
    fd = _appending(tmp_path)
    try:
        assert _after(quota, name, fd, 0, MIB, 0) == 11 * MIB + BLOCK
    finally:
        os.close(fd)


def test_vectored_writes_are_read_from_memory(
    quota: ScratchQuota, file: int, tmp_path: Path
) -> None:
    iov = (ctypes.c_uint64 * 4)(0x1000, MIB, 0x2000, MIB)  # two iovecs of 1 MiB
    address = ctypes.addressof(iov)
    assert _after(quota, "writev", file, address, 2) is None  # at offset 1 MiB: within
    assert _after(quota, "pwritev", file, address, 2, 9 * MIB) == 11 * MIB + BLOCK
    fd = _appending(tmp_path)
    try:
        assert _after(quota, "pwritev", fd, address, 2, 0) == 12 * MIB + BLOCK
    finally:
        os.close(fd)
    # pwritev2: RWF_APPEND appends on any fd; RWF_NOAPPEND writes at the offset again.
    assert _after(quota, "pwritev2", file, address, 2, 0, 0, 0x10) == 12 * MIB + BLOCK
    assert _after(quota, "pwritev2", file, address, 2, 0, 0, 0x20) is None
    assert _after(quota, "writev", file, 8, 2) == CAP + BLOCK  # unreadable: the most


def test_an_offset_held_in_memory_is_read(quota: ScratchQuota, file: int) -> None:
    offset = ctypes.c_int64(12 * MIB)
    pointer = ctypes.addressof(offset)
    assert _after(quota, "copy_file_range", 0, 0, file, pointer, MIB) == 13 * MIB + BLOCK
    assert _after(quota, "splice", 0, 0, file, 0, MIB) is None  # at its offset, 1 MiB


@pytest.mark.parametrize(
    ("mode", "offset", "length", "after"),
    [
        (0, 0, MIB, None),  # within the length: counted already
        (0, 16 * MIB - BLOCK, BLOCK, 16 * MIB),  # its last page: the length becomes 16 MiB
        (_ZERO_RANGE, 0, 12 * MIB, 12 * MIB),
        (_KEEP_SIZE, 8 * MIB, 6 * MIB, 14 * MIB),  # 4 MiB past the end, holes fillable
        (_KEEP_SIZE, 0, 100 * CAP, 100 * CAP),  # no RLIMIT_FSIZE for blocks past the end
        (_KEEP_SIZE | _PUNCH_HOLE, 0, 8 * MIB, None),
        (_COLLAPSE_RANGE, 0, MIB, None),
        (_INSERT_RANGE, 0, 3 * MIB, 13 * MIB),
        (0x100, 0, MIB, 12 * MIB),  # a mode newer than this code: longer, and past the end
    ],
    ids=[
        "within",
        "last-page",
        "zero-range",
        "keep-size",
        "keep-size-huge",
        "punch",
        "collapse",
        "insert",
        "unknown-mode",
    ],
)
def test_fallocate_charges_the_length_or_blocks_it_can_make(
    quota: ScratchQuota, file: int, mode: int, offset: int, length: int, after: int | None
) -> None:
    found = _after(quota, "fallocate", file, mode, offset, length)
    assert found == (None if after is None else after + BLOCK)


def test_blocks_allocated_past_the_end_stay_with_the_file(quota: ScratchQuota, file: int) -> None:
    charge = estimate(quota, ME, "fallocate", [file, _KEEP_SIZE, 10 * MIB, 2 * MIB, 0, 0], CAP)
    assert isinstance(charge, Charge) and charge.reserve == 2 * MIB and charge.key is not None
    quota.charge(charge.key, charge.after, reserve=charge.reserve)
    # Growing it later: its new length, and those blocks (its holes may still be filled).
    assert _after(quota, "ftruncate", file, 11 * MIB) == 11 * MIB + 2 * MIB + BLOCK


def test_what_cannot_grow_a_scratch_file_adds_nothing(quota: ScratchQuota, tmp_path: Path) -> None:
    (tmp_path / "r").write_bytes(b"")
    read_only = os.open(tmp_path / "r", os.O_RDONLY)
    elsewhere = os.open("/dev/shm", os.O_TMPFILE | os.O_RDWR, 0o600)  # another mount
    read, write = os.pipe()
    try:
        for fd in (read_only, elsewhere, write, 999):
            assert _after(quota, "pwrite64", fd, 0, MIB, 12 * MIB) is None, fd
    finally:
        for fd in (read_only, elsewhere, read, write):
            os.close(fd)


def test_calls_by_path_and_new_names_are_bounded(quota: ScratchQuota, tmp_path: Path) -> None:
    def extra(name: str, *args: int) -> int:
        charge = estimate(quota, ME, name, [*args, *[0] * (6 - len(args))], CAP)
        assert charge is not None and charge.key is None
        return charge.extra

    assert extra("truncate", 0, 5 * MIB) == 5 * MIB + 2 * BLOCK
    assert extra("truncate", 0, 100 * CAP) == CAP + 2 * BLOCK
    assert extra("setxattr", 0, 0, 0, 3000) == 3000 + 2 * BLOCK
    assert extra("setxattrat") == 65536 + 2 * BLOCK  # its size in memory: the most
    assert extra("mkdir") == 2 * BLOCK


def test_a_name_that_exists_adds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "there").write_bytes(b"")
    there, absent = ctypes.create_string_buffer(b"there"), ctypes.create_string_buffer(b"no")
    full = ctypes.create_string_buffer(str(tmp_path / "there").encode())
    assert names_existing(ME, "open", [ctypes.addressof(there)])
    assert not names_existing(ME, "open", [ctypes.addressof(absent)])
    assert names_existing(ME, "openat", [0xFFFFFF9C, ctypes.addressof(there)])  # AT_FDCWD
    assert names_existing(ME, "creat", [ctypes.addressof(full)])
    assert names_existing(ME, "rename", [0, ctypes.addressof(there)])
    assert not names_existing(ME, "mkdir", [ctypes.addressof(there)])  # always a new name
