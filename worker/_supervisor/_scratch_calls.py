"""What each call the write gate holds can make the scratch dir take: as Linux carries it
out, not as the call seems to ask (the keeper's side, ``_scratch_gate``, decides with it).

- a write lands at the file's end on an ``O_APPEND`` fd or with ``RWF_APPEND``, whatever
  offset it names (``RWF_NOAPPEND``: at the offset); elsewhere at its offset (read from the
  waiting child's memory for ``splice`` and ``copy_file_range``), and carries its count (the
  iovecs, read likewise); the file grows to its end, never past ``cap`` (RLIMIT_FSIZE);
- ``fallocate`` sets a length (``off + len``, or ``len`` more with ``INSERT_RANGE``) unless
  ``KEEP_SIZE``, which allocates blocks past the end instead (charged, and remembered for the
  file: a mapping can then fill the holes within the length too); punching and collapsing
  free space;
- ``ftruncate`` sets a length, ``truncate`` and the extended-attribute setters add at most
  their length (and the attribute's block), a new name at most two blocks (its directory's,
  and its own for a directory or a symlink's target);
- a file counts ``max(length, blocks)``: a write within its length adds nothing (a hole
  filled there was counted already), past it the file may take its new length, its blocks
  and those allocated past the end, plus a block of slack.

Only a regular file opened for writing through the scratch dir's mount can grow here.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from .._kernel._gate_filter import NAME_SYSCALLS
from ._scratch_proc import Key, OpenFile, open_file, read_memory
from ._scratch_quota import ScratchQuota

BLOCK = 4096
"""Slack per growing call: a file's allocated blocks may pass its length by a block."""
_O_APPEND = 0o2000
_RWF_APPEND = 0x10
_RWF_NOAPPEND = 0x20
_KEEP_SIZE, _PUNCH_HOLE, _COLLAPSE_RANGE, _INSERT_RANGE = 0x01, 0x02, 0x08, 0x20
_FREES = _KEEP_SIZE | _PUNCH_HOLE | _COLLAPSE_RANGE
_KNOWN_MODES = 0xFF  # up to FALLOC_FL_WRITE_ZEROES (Linux 6.17)
_XATTR_MAX = 65536
"""The largest value an extended attribute may have (XATTR_SIZE_MAX)."""
_BY_PATH = {"truncate": 1, "setxattr": 3, "lsetxattr": 3, "fsetxattr": 3, "setxattrat": -1}
"""Calls charged without finding their file: the argument bounding what they add (-1: in
memory, the most an attribute may take)."""
_NEW_NAME_ARGS = {
    "open": (None, 0),
    "creat": (None, 0),
    "openat": (0, 1),
    "openat2": (0, 1),
    "rename": (None, 1),
    "renameat": (2, 3),
    "renameat2": (2, 3),
}
"""Where these find the name they may add (its directory fd, ``None``: the cwd; its path):
a name that exists already adds nothing (looked up only when the quota is nearly full)."""
_AT_FDCWD = -100
_PATH_MAX = 4096
_TARGET_ARG = {"copy_file_range": 2, "splice": 2}
"""Which argument is the file written to (the first one for the others)."""
_COUNT_ARG = {"write": 2, "pwrite64": 2, "sendfile": 3, "copy_file_range": 4, "splice": 4}
_VECTORED = frozenset(("writev", "pwritev", "pwritev2"))


@dataclass(frozen=True)
class Charge:
    """What one call may add: to one file, or not tied to a file."""

    key: Key | None = None
    after: int = 0
    """The most the file may take once the call has run."""
    reserve: int = 0
    """Bytes it may allocate past the file's end (``FALLOC_FL_KEEP_SIZE``)."""
    extra: int = 0
    names: int = 0


def estimate(quota: ScratchQuota, tid: int, name: str, args: list[int], cap: int) -> Charge | None:
    """What call ``name`` with ``args`` (the waiting child ``tid``'s) may add to the
    scratch dir (``None``: nothing), no file growing past ``cap`` (RLIMIT_FSIZE).
    Raises :class:`Blind`."""
    if name in NAME_SYSCALLS:
        return Charge(extra=2 * BLOCK, names=1)
    if name in _BY_PATH:
        arg = _BY_PATH[name]
        most = cap if name == "truncate" else _XATTR_MAX
        bound = most if arg < 0 else max(0, min(_signed(args[arg]), most))
        return Charge(extra=bound + 2 * BLOCK)
    target = open_file(tid, args[_TARGET_ARG.get(name, 0)] & 0xFFFFFFFF)
    if target is None or not target.regular or not target.writable:
        return None  # not a file it may write: the call fails, or grows nothing here
    if target.mnt_id != quota.mount.mnt_id:
        return None
    size = target.st.st_size
    reserve = 0
    if name == "fallocate":
        end, reserve = _fallocated(args[1], _signed(args[2]), _signed(args[3]), size)
    elif name == "ftruncate":
        end = _signed(args[1])
    else:
        end = _written_end(tid, name, args, target, cap)
    end = min(end, cap)
    if end <= size and not reserve:
        return None  # within the length: a hole filled there was counted already
    blocks = int(target.st.st_blocks) * 512
    past_end = quota.reserved(target.key) + reserve
    after = max(blocks + reserve, max(end, size) + min(past_end, blocks + reserve))
    return Charge(key=target.key, after=after + BLOCK, reserve=reserve)


def _written_end(tid: int, name: str, args: list[int], target: OpenFile, cap: int) -> int:
    """Where a write ends in its file: its start (the end for an append, whatever the
    offset) plus its count; ``cap`` when the count or offset cannot be read."""
    size = target.st.st_size
    appending = bool(target.flags & _O_APPEND)
    if name in _VECTORED:
        count = _iov_total(tid, args[1], args[2])
    else:
        count = args[_COUNT_ARG[name]]
    if count is None:
        return cap
    if name == "pwritev2":
        flags = args[5]
        if flags & _RWF_APPEND:
            appending = True
        elif flags & _RWF_NOAPPEND and _signed(args[3]) != -1:
            appending = False
    if appending:
        start = max(size, target.pos) if name == "sendfile" else size
    elif name in ("pwrite64", "pwritev") or (name == "pwritev2" and _signed(args[3]) != -1):
        start = _signed(args[3])
    elif name in _TARGET_ARG and args[3]:  # an offset the child holds in memory
        data = read_memory(tid, args[3], 8)
        if data is None:
            return cap
        start = struct.unpack("=q", data)[0]
    else:
        start = target.pos
    return start + count


def names_existing(tid: int, name: str, args: list[int]) -> bool:
    """Whether the name this call (of :data:`_NEW_NAME_ARGS`) may add exists already (an
    ``open`` follows a symlink to it, a rename does not): then it adds none. Raises
    :class:`Blind`."""
    if name not in _NEW_NAME_ARGS:
        return False
    dirfd_arg, path_arg = _NEW_NAME_ARGS[name]
    path = _read_string(tid, args[path_arg])
    if not path:
        return False
    if path.startswith(b"/"):
        where = f"/proc/{tid}/root".encode() + path
    else:
        dirfd = _AT_FDCWD if dirfd_arg is None else _signed32(args[dirfd_arg])
        base = f"/proc/{tid}/cwd" if dirfd == _AT_FDCWD else f"/proc/{tid}/fd/{dirfd}"
        where = base.encode() + b"/" + path
    try:
        if name.startswith("rename"):
            os.lstat(where)
        else:
            os.stat(where)
    except OSError:
        return False  # not there (or not to be found: the call fails, or adds it)
    return True


def _read_string(tid: int, address: int) -> bytes | None:
    """The NUL-terminated path at ``address`` in the waiting child's memory, read page by
    page (a string may end just before an unmapped page); ``None`` when unreadable."""
    found = b""
    while len(found) < _PATH_MAX:
        chunk = read_memory(tid, address, 4096 - address % 4096)
        if chunk is None:
            return None
        end = chunk.find(b"\0")
        if end >= 0:
            return found + chunk[:end]
        found += chunk
        address += len(chunk)
    return None


def _fallocated(mode: int, offset: int, length: int, size: int) -> tuple[int, int]:
    """``fallocate``'s effect on a file of length ``size``: the length it may set, and the
    bytes it may allocate past the end (``FALLOC_FL_KEEP_SIZE``)."""
    if offset < 0 or length <= 0:
        return size, 0  # EINVAL
    end = offset + length
    if mode & ~_KNOWN_MODES:  # a mode newer than this code: the most any could do
        return max(size + length, end), length
    if mode & _PUNCH_HOLE or (mode & _COLLAPSE_RANGE and not mode & ~_FREES):
        return size, 0  # frees blocks (and shortens, for a collapse)
    if mode & _INSERT_RANGE:
        return size + length, 0  # a hole of ``length`` inserted: the file that much longer
    if mode & _KEEP_SIZE:
        return size, max(0, end - max(offset, size))
    return max(size, end), 0


_IOV = struct.Struct("=QQ")  # struct iovec: base, length
_IOV_MAX = 1024


def _iov_total(tid: int, address: int, count: int) -> int | None:
    """The bytes a vectored write of ``count`` iovecs at ``address`` (the waiting child's
    memory) carries; ``None`` when unreadable (the caller assumes the most)."""
    if not 0 <= count <= _IOV_MAX:
        return None
    data = read_memory(tid, address, count * _IOV.size)
    if data is None:
        return None
    total: int = sum(length for _, length in _IOV.iter_unpack(data))
    return total


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _signed32(value: int) -> int:
    """An ``int`` argument (the kernel reads the low 32 bits), e.g. a directory fd."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value
