"""The keeper's write gate (``tests/worker/_gated.py`` runs a keeper and a writer behind the
gate): the scratch dir never holds more than the quota whatever the writer tries, each call
counted as Linux carries it out (appends at the end, every ``fallocate`` mode, files reached
only through a mapping, new names, extended attributes, an overlayfs), a full one is ENOSPC
as a tmpfs would say, and a keeper that cannot see what it needs kills, naming why."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat
import struct
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests.worker._gated import MIB, gated, set_dumpable
from worker._kernel import _seccomp

pytestmark = pytest.mark.skipif(not _seccomp.available(), reason="libseccomp is not available")

QUOTA = 16 * MIB
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
)
_KEEP_SIZE, _PUNCH_HOLE, _COLLAPSE_RANGE, _ZERO_RANGE, _INSERT_RANGE = 1, 2, 8, 0x10, 0x20


def _outcome(fn: Callable[[], object]) -> str:
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    except RuntimeError as exc:
        return str(exc)
    return "ok"


def _fallocate(fd: int, mode: int, offset: int, length: int) -> None:
    call = _libc.fallocate
    if call(fd, mode, ctypes.c_long(offset), ctypes.c_long(length)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _map_and_fill(fd: int, size: int) -> None:
    """Map ``size`` bytes of ``fd`` shared and write every page through the mapping."""
    address = _libc.mmap(None, size, 3, 1, fd, 0)  # PROT_READ|PROT_WRITE, MAP_SHARED
    if address in (None, ctypes.c_void_p(-1).value):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    ctypes.memset(address, 1, size)


def _held() -> int:
    """Bytes the writer's files take, by its own count: its names and its open fds."""
    seen: dict[tuple[int, int], int] = {}
    fds = [f"/proc/self/fd/{fd}" for fd in os.listdir("/proc/self/fd")]
    for path in [*os.listdir("."), *fds]:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            seen[(st.st_dev, st.st_ino)] = max(st.st_size, st.st_blocks * 512)
    return sum(seen.values())


# --- appends, plain and vectored ------------------------------------------------------


_WRITES: dict[str, tuple[int, Callable[[int, bytes], int]]] = {
    "write": (0, os.write),
    "write-append": (os.O_APPEND, os.write),
    "pwrite-append": (os.O_APPEND, lambda fd, data: os.pwrite(fd, data, 0)),
    "pwritev-append": (os.O_APPEND, lambda fd, data: os.pwritev(fd, [data], 0)),
    "pwritev2-rwf-append": (0, lambda fd, data: os.pwritev(fd, [data], 0, os.RWF_APPEND)),
}


@pytest.mark.parametrize("how", sorted(_WRITES))
@pytest.mark.parametrize("unlinked", [False, True], ids=["named", "unlinked"])
def test_writes_stop_at_the_quota_whatever_offset_they_name(how: str, unlinked: bool) -> None:
    # On an O_APPEND fd, pwrite and pwritev append whatever their offset; RWF_APPEND too.
    flags, write = _WRITES[how]

    def steps() -> dict[str, object]:
        written = 0
        try:
            for i in range(40):
                fd = os.open(f"f{i}", os.O_CREAT | os.O_WRONLY | flags, 0o600)
                if unlinked:
                    os.unlink(f"f{i}")
                for _ in range(2):
                    written += write(fd, b"x" * MIB)
        except OSError as exc:
            return {"written": written, "error": errno.errorcode.get(exc.errno or 0)}
        return {"written": written, "error": None}

    run = gated(steps)
    assert run.result is not None and run.result["error"] == "ENOSPC", run
    assert 12 * MIB <= run.result["written"] <= QUOTA and run.most <= QUOTA, run
    assert run.refused >= 1


# --- files reached only through a mapping ---------------------------------------------


@pytest.mark.parametrize("size", [4 * MIB, QUOTA], ids=["4MiB", "the-cap"])
@pytest.mark.parametrize("how", ["o_tmpfile", "unlinked"])
def test_a_file_reached_only_through_a_mapping_still_counts(how: str, size: int) -> None:
    # A file given its length by fallocate (its last page), mapped shared, its fd closed and
    # no name left, then filled through the mapping: the gate never sees it again.
    def steps() -> dict[str, object]:
        held = 0
        try:
            for i in range(12):
                if how == "o_tmpfile":
                    fd = os.open(".", os.O_TMPFILE | os.O_RDWR, 0o600)
                else:
                    fd = os.open(f"m{i}", os.O_CREAT | os.O_RDWR, 0o600)
                _fallocate(fd, 0, size - 4096, 4096)
                if how == "unlinked":
                    os.unlink(f"m{i}")
                _map_and_fill(fd, size)
                os.close(fd)
                held += size
        except OSError as exc:
            return {"held": held, "error": errno.errorcode.get(exc.errno or 0)}
        return {"held": held, "error": None}

    run = gated(steps)
    assert run.result is not None and run.result["error"] == "ENOSPC", run
    assert run.result["held"] <= QUOTA and run.most <= QUOTA, run


def test_unlinked_files_count_while_held_and_free_their_space_when_closed() -> None:
    def steps() -> dict[str, object]:
        held = []
        for i in range(3):
            fd = os.open(f"u{i}", os.O_CREAT | os.O_WRONLY, 0o600)
            os.unlink(f"u{i}")
            os.write(fd, b"y" * (5 * MIB))
            held.append(fd)
        full = _outcome(lambda: os.write(held[0], b"y" * (2 * MIB)))
        for fd in held:
            os.close(fd)
        again = _outcome(lambda: os.write(os.open("v", os.O_CREAT | os.O_WRONLY), b"z" * MIB))
        return {"full": full, "after closing": again}

    run = gated(steps)
    assert run.result == {"full": "ENOSPC", "after closing": "ok"}
    assert run.most <= QUOTA


# --- every call that can make a file take more ----------------------------------------


def _append_past(fd: int) -> None:
    os.ftruncate(fd, 15 * MIB)
    os.pwrite(os.open("t", os.O_WRONLY | os.O_APPEND), b"x" * 2 * MIB, 0)  # at its end


def _rewrite_a_full_file(fd: int) -> None:
    os.pwrite(fd, b"x" * 15 * MIB, 0)
    os.pwrite(fd, b"y" * 15 * MIB, 0)


def _keep_size_then_fill_holes(fd: int) -> None:
    # Blocks past the end of a sparse file, then its holes filled through a mapping: it
    # takes its length and those blocks, more than either alone.
    os.ftruncate(fd, 8 * MIB)
    _fallocate(fd, _KEEP_SIZE, 8 * MIB, 6 * MIB)
    _map_and_fill(fd, 8 * MIB)
    os.write(os.open("u", os.O_CREAT | os.O_WRONLY, 0o600), b"x" * 7 * MIB)


def _allocated_then(mib: int, mode: int, length: int) -> Callable[[int], None]:
    def call(fd: int) -> None:
        os.posix_fallocate(fd, 0, mib * MIB)
        _fallocate(fd, mode, 0, length)

    return call


_CALLS: dict[str, tuple[Callable[[int], object], str]] = {
    "ftruncate": (lambda fd: os.ftruncate(fd, 15 * MIB), "ok"),
    "ftruncate-past": (lambda fd: os.ftruncate(fd, 17 * MIB), "ENOSPC"),
    "truncate-past": (lambda fd: os.truncate("t", 17 * MIB), "ENOSPC"),
    "pwrite-past": (lambda fd: os.pwrite(fd, b"x", 17 * MIB), "ENOSPC"),
    "writev": (lambda fd: os.writev(fd, [b"x" * MIB] * 2), "ok"),
    "pwrite-append-past": (_append_past, "ENOSPC"),
    "rewrite-a-full-file": (_rewrite_a_full_file, "ok"),
    "fallocate-past": (lambda fd: os.posix_fallocate(fd, 0, 17 * MIB), "ENOSPC"),
    "fallocate-its-last-page": (lambda fd: _fallocate(fd, 0, 17 * MIB - 4096, 4096), "ENOSPC"),
    "fallocate-keep-size": (lambda fd: _fallocate(fd, _KEEP_SIZE, 0, 8 * MIB), "ok"),
    "fallocate-keep-size-past": (lambda fd: _fallocate(fd, _KEEP_SIZE, 0, 17 * MIB), "ENOSPC"),
    "fallocate-keep-size-beyond-the-cap": (
        lambda fd: _fallocate(fd, _KEEP_SIZE, 64 * MIB, 17 * MIB),
        "ENOSPC",
    ),
    "fallocate-keep-size-then-fill-holes": (_keep_size_then_fill_holes, "ENOSPC"),
    "fallocate-zero-range-past": (lambda fd: _fallocate(fd, _ZERO_RANGE, 0, 17 * MIB), "ENOSPC"),
    "fallocate-punch-hole": (_allocated_then(15, _KEEP_SIZE | _PUNCH_HOLE, 8 * MIB), "ok"),
    "fallocate-collapse": (_allocated_then(15, _COLLAPSE_RANGE, MIB), "ok"),
    "fallocate-insert-past": (_allocated_then(12, _INSERT_RANGE, 8 * MIB), "ENOSPC"),
    "ioctl-resvsp64": (
        lambda fd: fcntl.ioctl(fd, 0x4030582A, struct.pack("@hhqq6i", 0, 0, 0, 8 * MIB, *[0] * 6)),
        "ENOTSUP",
    ),
    "ioctl-ficlone": (lambda fd: fcntl.ioctl(fd, 0x40049409, fd), "ENOTSUP"),
}


@pytest.mark.parametrize("name", sorted(_CALLS))
def test_every_way_to_grow_a_file_is_decided(name: str) -> None:
    call, expected = _CALLS[name]

    def steps() -> dict[str, object]:
        fd = os.open("t", os.O_CREAT | os.O_RDWR, 0o600)
        return {"outcome": _outcome(lambda: call(fd)), "held": _held()}

    run = gated(steps)
    assert run.result is not None and run.result["outcome"] == expected, run
    assert run.result["held"] <= QUOTA and run.most <= QUOTA, run


# --- names and extended attributes ----------------------------------------------------


@pytest.mark.parametrize("make", ["mkdir", "symlink", "xattr"])
def test_names_and_attributes_take_blocks_and_count(make: str) -> None:
    # A directory takes a block, a long symlink's target one, an extended attribute too
    # (ext4: past the inode's room): none of them grows a file, each is decided.
    def steps() -> dict[str, object]:
        made = 0
        try:
            for i in range(2000):
                if make == "mkdir":
                    os.mkdir(f"d{i}")
                elif make == "symlink":
                    os.symlink("x" * 3000, f"s{i}")
                else:
                    open(f"x{i}", "w").close()
                    os.setxattr(f"x{i}", "user.k", b"v" * 3000)
                made += 1
        except OSError as exc:
            return {"made": made, "error": errno.errorcode.get(exc.errno or 0)}
        return {"made": made, "error": None}

    run = gated(steps, quota=MIB)
    assert run.result is not None and run.result["error"] == "ENOSPC", run
    assert 100 <= run.result["made"] and run.result["made"] * 4096 <= MIB, run
    assert run.most <= MIB


def test_an_existing_name_opened_again_adds_nothing_when_full() -> None:
    def steps() -> dict[str, object]:
        with open("full", "wb") as fh:
            fh.write(b"x" * 15 * MIB)
        return {
            "reopen": _outcome(lambda: open("full", "ab").close()),
            "new name": _outcome(lambda: open("other", "wb").close()),
            "rename over": _outcome(lambda: os.rename("full", "full")),
        }

    run = gated(steps, quota=15 * MIB + 4096)
    assert run.result == {"reopen": "ok", "new name": "ENOSPC", "rename over": "ok"}, run


# --- what the gate lets through, and what it refuses ----------------------------------


def test_writes_elsewhere_pass_and_threads_are_refused() -> None:
    def steps() -> dict[str, object]:
        read, write = os.pipe()
        thread = threading.Thread(target=lambda: None)
        return {
            "pipe": _outcome(lambda: os.write(write, b"x" * 4096)),
            "dev null": _outcome(lambda: os.write(os.open("/dev/null", os.O_WRONLY), b"x")),
            "read-only": _outcome(lambda: os.write(os.open(".", os.O_RDONLY), b"x")),
            "thread": _outcome(thread.start),
        }

    run = gated(steps)
    assert run.result == {
        "pipe": "ok",
        "dev null": "ok",
        "read-only": "EBADF",
        "thread": "can't start new thread",
    }
    assert run.refused == 0


# --- an overlayfs: scratch files report another device than the dir -------------------


@pytest.mark.parametrize("how", ["flood", "mapped"])
def test_on_an_overlay_the_mount_decides_what_is_scratch(how: str) -> None:
    def steps() -> dict[str, object]:
        assert os.stat(".").st_dev != os.fstat(os.open("probe", os.O_CREAT)).st_dev
        held = 0
        try:
            for i in range(40):
                fd = os.open(f"f{i}", os.O_CREAT | os.O_RDWR, 0o600)
                if how == "flood":
                    held += os.write(fd, b"x" * MIB)
                else:
                    _fallocate(fd, 0, MIB - 4096, 4096)
                    os.unlink(f"f{i}")
                    _map_and_fill(fd, MIB)
                    os.close(fd)
                    held += MIB
        except OSError as exc:
            return {"held": held, "error": errno.errorcode.get(exc.errno or 0)}
        return {"held": held, "error": None}

    run = gated(steps, overlay=True)
    assert run.result is not None and run.result["error"] == "ENOSPC", run
    assert 12 * MIB <= run.result["held"] <= QUOTA and run.most <= QUOTA, run


# --- a keeper that cannot see kills, naming why ---------------------------------------


def _hide_its_fds() -> dict[str, Any]:
    fd = os.open("f", os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b"x" * MIB)
    set_dumpable(False)
    os.write(fd, b"x" * MIB)
    return {"done": True}


def _hide_a_directory() -> dict[str, Any]:
    os.mkdir("d", 0o300)  # its owner may create and open files in it, not list it
    fd = os.open("d/f", os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b"x" * MIB)
    return {"done": True}


def _just_write() -> dict[str, Any]:
    os.write(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600), b"x" * MIB)
    return {"done": True}


@pytest.mark.parametrize(
    ("steps", "fds_left", "why"),
    [
        (_hide_its_fds, None, "cannot stat /proc/"),
        (_hide_a_directory, None, "cannot watch /tmp/"),
        (_just_write, 0, "Too many open files"),
    ],
    ids=["non-dumpable", "directory-unreadable", "keeper-out-of-fds"],
)
def test_a_keeper_that_cannot_see_kills_naming_why(
    steps: Callable[[], dict[str, Any]], fds_left: int | None, why: str
) -> None:
    run = gated(steps, nobody=True, keeper_fds_left=fds_left)
    assert run.result is None, run  # killed on the call it could not see, never past it
    assert run.reason.startswith("its scratch quota could not be kept: "), run
    assert why in run.reason, run


def test_a_directory_locked_after_the_keeper_saw_it_is_no_reason_to_kill() -> None:
    def steps() -> dict[str, Any]:
        os.mkdir("d")
        fd = os.open("d/f", os.O_CREAT | os.O_WRONLY, 0o600)
        os.write(fd, b"x" * MIB)
        os.chmod("d", 0)
        os.write(fd, b"x" * MIB)
        os.close(fd)
        return {"more": _outcome(lambda: os.write(os.open("g", os.O_CREAT | os.O_WRONLY), b"x"))}

    run = gated(steps, nobody=True)
    assert run.result == {"more": "ok"} and run.reason == "", run
    assert 2 * MIB <= run.most <= QUOTA
