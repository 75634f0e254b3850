"""The keeper's scratch quota (no tmpfs): a forked writer takes steps in lockstep with the
watcher, so each test reads exactly what the keeper saw after each step."""

from __future__ import annotations

import ctypes
import encodings.ascii  # noqa: F401 - as uid 65534 it could not be imported (under /root)
import errno
import json
import os
import resource
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worker._supervisor import _scratch_quota
from worker._supervisor._scratch_quota import ScratchQuota

MIB = 1 << 20
LIMIT = 8 * MIB


def _step(op: str, *args: Any) -> Any:
    """One step of the writer, in its scratch dir; what it returns is reported."""
    if op == "write":  # write(name, mib): append mib MiB to a named file
        with open(args[0], "ab") as fh:
            fh.write(b"x" * (args[1] * MIB))
    elif op == "hold":  # hold(name, mib): create, unlink, then write while it is open
        fd = os.open(args[0], os.O_CREAT | os.O_WRONLY, 0o600)
        os.unlink(args[0])
        os.write(fd, b"y" * (args[1] * MIB))
        _held.append(fd)
    elif op == "tmpfile":  # tmpfile(mib): an O_TMPFILE file that never has a name
        fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600)
        os.write(fd, b"z" * (args[0] * MIB))
        _held.append(fd)
    elif op == "release":  # close every held fd
        while _held:
            os.close(_held.pop())
    elif op == "remove":
        os.unlink(args[0])
    elif op == "rename":
        os.rename(args[0], args[1])
    elif op == "mkdir":
        os.mkdir(args[0])
    elif op == "touch":  # touch(prefix, n): n empty files
        for i in range(args[1]):
            open(f"{args[0]}{i}", "w").close()
    elif op == "map":  # map(mib): an O_TMPFILE file of mib MiB, filled through a mapping
        fd = os.open(".", os.O_TMPFILE | os.O_RDWR, 0o600)
        size = args[0] * MIB
        os.ftruncate(fd, size)
        address = _libc.mmap(None, size, 3, 1, fd, 0)  # shared, read-write; no dup'd fd
        ctypes.memset(address, 1, size)
        _maps.append((address, size))
        _held.append(fd)
    elif op == "unmap":  # remove every mapping
        while _maps:
            _libc.munmap(*_maps.pop())
    elif op == "xattr":  # xattr(name): an attribute past the inode's room (ext4: a block)
        os.setxattr(args[0], "user.k", b"v" * 3000)
    elif op == "mkdirs":  # mkdirs(prefix, n): n empty directories
        for i in range(args[1]):
            os.mkdir(f"{args[0]}{i}")
    return None


_held: list[int] = []
_maps: list[tuple[int, int]] = []
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
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def _only_fds(*keep: int) -> None:
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


class Writer:
    """A forked process in ``folder`` that takes one step per :meth:`take`."""

    def __init__(self, folder: str) -> None:
        self._to_r, self._to_w = os.pipe()
        self._from_r, self._from_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            self._serve(folder)
        os.close(self._to_r)
        os.close(self._from_w)

    def _serve(self, folder: str) -> None:
        os.close(self._to_w)
        os.close(self._from_r)
        _only_fds(self._to_r, self._from_w)  # like a child: none of the test runner's files
        os.chdir(folder)
        # What the child applies itself in keeper-quota mode: one file stays within quota.
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
        with os.fdopen(self._to_r, "rb") as steps, os.fdopen(self._from_w, "wb") as out:
            for line in steps:
                op, *args = json.loads(line)
                try:
                    _step(op, *args)
                    answer = "ok"
                except OSError as exc:
                    answer = errno.errorcode.get(exc.errno or 0, str(exc))
                out.write(json.dumps(answer).encode() + b"\n")
                out.flush()
        os._exit(0)

    def take(self, op: str, *args: Any) -> str:
        os.write(self._to_w, json.dumps([op, *args]).encode() + b"\n")
        line = b""
        while not line.endswith(b"\n"):
            chunk = os.read(self._from_r, 4096)
            assert chunk, "the writer died"
            line += chunk
        answer: str = json.loads(line)
        return answer

    def close(self) -> None:
        os.close(self._to_w)
        os.close(self._from_r)
        os.waitpid(self.pid, 0)


@pytest.fixture
def scratch() -> Iterator[tuple[Writer, ScratchQuota]]:
    folder = tempfile.mkdtemp(prefix="ptc-quota-test-")
    writer = Writer(folder)
    writer.take("release")  # answered: it has closed the test runner's files (not its to count)
    quota = ScratchQuota(folder, writer.pid, LIMIT)
    yield writer, quota
    quota.close()
    writer.close()
    shutil.rmtree(folder)


def _steps(
    writer: Writer, quota: ScratchQuota, *steps: tuple[Any, ...]
) -> list[tuple[str, int, str]]:
    """Each step's answer, then the keeper's total (MiB) and kill reason after it."""
    seen = []
    for op, *args in steps:
        answer = writer.take(op, *args)
        reason = quota.check()
        seen.append((answer, quota.total // MIB, reason))
    return seen


def test_writes_fail_once_the_files_pass_the_quota(
    scratch: tuple[Writer, ScratchQuota],
) -> None:
    writer, quota = scratch
    seen = _steps(
        writer, quota, ("write", "a", 4), ("write", "b", 3), ("write", "c", 2), ("write", "d", 1)
    )
    # 9 MiB passed 8: the keeper refused growth after it saw it; the next write fails.
    assert [answer for answer, _, _ in seen] == ["ok", "ok", "ok", "EFBIG"]
    assert [total for _, total, _ in seen] == [4, 7, 9, 9]
    assert quota.refused and all(reason == "" for _, _, reason in seen)


@pytest.mark.parametrize(
    "hidden",
    [("hold", "gone", 5), ("tmpfile", 5)],
    ids=["unlinked-but-open", "o_tmpfile"],
)
def test_files_without_a_name_count_while_they_are_held(
    scratch: tuple[Writer, ScratchQuota], hidden: tuple[Any, ...]
) -> None:
    writer, quota = scratch
    seen = _steps(writer, quota, hidden, ("write", "a", 4), ("write", "b", 1))
    assert [total for _, total, _ in seen] == [5, 9, 9]
    assert seen[-1][0] == "EFBIG"


def test_deleted_and_closed_files_no_longer_count(
    scratch: tuple[Writer, ScratchQuota],
) -> None:
    writer, quota = scratch
    seen = _steps(
        writer,
        quota,
        ("write", "a", 3),
        ("hold", "b", 2),
        ("remove", "a"),
        ("release",),
        ("write", "c", 6),
    )
    assert [total for _, total, _ in seen] == [3, 5, 2, 0, 6]
    assert not quota.refused


def test_subdirectories_and_renames_are_followed(
    scratch: tuple[Writer, ScratchQuota],
) -> None:
    writer, quota = scratch
    seen = _steps(
        writer,
        quota,
        ("mkdir", "sub"),
        ("write", "sub/a", 3),
        ("mkdir", "sub/deeper"),
        ("write", "sub/deeper/b", 3),
        ("rename", "sub", "moved"),
        ("write", "moved/deeper/b", 3),
    )
    # Directories take their own blocks (4 KiB each), under a MiB.
    assert [total for _, total, _ in seen] == [0, 3, 3, 6, 6, 9]
    assert seen[-1][0] == "ok" and quota.refused  # the write that passed it was already done


def test_too_many_names_make_the_keeper_kill(
    scratch: tuple[Writer, ScratchQuota], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_scratch_quota, "MAX_ENTRIES", 50)
    writer, quota = scratch
    seen = _steps(writer, quota, ("touch", "f", 40), ("touch", "g", 20))
    assert seen[0][2] == ""
    assert "more than 50 files and directories" in seen[1][2]


def test_a_file_only_mapped_counts_until_unmapped(scratch: tuple[Writer, ScratchQuota]) -> None:
    # No name, and once "release" closed its fd, nothing but the mapping holds it.
    writer, quota = scratch
    seen = _steps(writer, quota, ("map", 3), ("release",), ("write", "a", 4), ("unmap",))
    assert [total for _, total, _ in seen] == [3, 3, 7, 4]


def test_attributes_and_directories_take_blocks(scratch: tuple[Writer, ScratchQuota]) -> None:
    writer, quota = scratch
    start = quota.total
    writer.take("touch", "x", 1)
    quota.check()
    writer.take("xattr", "x0")  # IN_ATTRIB: the file takes its attribute's block
    quota.check()
    assert quota.total - start >= 4096
    before = quota.total
    writer.take("mkdirs", "d", 64)
    quota.check()
    assert quota.total - before >= 64 * 4096  # a block each (and the scratch dir grew)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another uid")
def test_a_child_closed_to_its_keeper_from_the_start_is_counted_by_name() -> None:
    # Without Landlock a child is not made dumpable: its keeper (uid 65534 here, the child
    # this root test process) never sees its fds. Without the gate the count keeps to
    # names; with it, the quota is not set up at all (a hard quota it could not keep).
    tmp_path = Path(tempfile.mkdtemp(prefix="ptc-quota-test-"))  # reachable by uid 65534
    os.chown(tmp_path, 65534, 65534)
    child = os.getpid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            quota = ScratchQuota(str(tmp_path), child, LIMIT)
            (tmp_path / "f").write_bytes(b"x" * MIB)
            reason = quota.check()
            found: dict[str, Any] = {
                "names_only": quota.names_only,
                "mib": quota.total // MIB,
                "reason": reason,
            }
            try:
                ScratchQuota(str(tmp_path), child, LIMIT, refuse_growth=False)
                found["gated"] = "set up"
            except OSError as exc:
                found["gated"] = str(exc)
        except BaseException as exc:
            found = {"error": repr(exc)}
        os.write(write, json.dumps(found).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        found = json.loads(fh.read())
    os.waitpid(pid, 0)
    shutil.rmtree(tmp_path)
    assert "error" not in found, found
    assert found["names_only"].startswith("cannot list /proc/"), found
    assert found["mib"] == 1 and found["reason"] == "", found
    assert "cannot list /proc/" in found["gated"], found
