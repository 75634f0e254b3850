"""The keeper's yes or no to every call that could make the scratch dir take more space,
where no tmpfs holds the scratch quota: a hard quota, as a tmpfs gives, without a mount.

The child loads a seccomp filter (``_gate_filter``) that sends each such call to the keeper
as a user notification and waits; it also refuses new threads, so the child has one thread
and nothing changes its files, offsets or fd table while a call waits. For each call the
keeper finds the file (``/proc/<child>/fd/<fd>`` and its ``fdinfo``: a regular file opened
for writing through the scratch dir's mount, else no growth there), computes the most the
call can make it take, as Linux does it rather than as the call seems to ask:

- a write lands at the file's end on an ``O_APPEND`` fd or with ``RWF_APPEND``, whatever
  offset it names; elsewhere at its offset (read from the waiting child's memory for
  ``splice`` and ``copy_file_range``), and carries its count (the iovecs, read likewise);
- ``fallocate`` sets a length (``off + len``, or ``len`` more with ``INSERT_RANGE``) unless
  ``KEEP_SIZE``, which allocates blocks past the end instead (charged, and remembered for the
  file: a mapping can then fill the holes within the length too); punching and collapsing
  free space;
- ``ftruncate`` sets a length, ``truncate`` and the extended-attribute setters by path add
  at most their length, a new name at most two blocks (its directory's, and its own for a
  directory or a symlink's target);

and answers "go on" (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``, Linux 5.5) when the count
(``_scratch_quota``) stays within the quota, else ENOSPC, as a full tmpfs would (also once
the scratch dir holds as many names as a tmpfs has inodes). A growth approved for a file is
charged to it at once; growth not tied to a file is kept aside. Both hold until a recount,
which happens only while the child waits on a call: then every approved call has completed,
and what the files take is read again. When the keeper cannot see what it needs
(``_scratch_proc.Blind``), the call is never answered and the keeper kills the child,
naming why.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import struct
from dataclasses import dataclass

from ._scratch_proc import Blind, Key, OpenFile, open_file, read_memory
from ._scratch_quota import MAX_ENTRIES, ScratchQuota

_NOTIF = struct.Struct("=QIIiIQ6Q")  # struct seccomp_notif: id, pid, flags, seccomp_data
_RESP = struct.Struct("=QqiI")  # struct seccomp_notif_resp: id, val, error, flags
_IOCTL_RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV
_IOCTL_SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND
_FLAG_CONTINUE = 1
_BLOCK = 4096
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
_NAMES = frozenset(
    ("open", "openat", "openat2", "creat", "mkdir", "mkdirat", "symlink", "symlinkat")
    + ("link", "linkat", "rename", "renameat", "renameat2", "mknod", "mknodat")
)
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
class _Charge:
    """What one call may add: to one file, or not tied to a file."""

    key: Key | None = None
    after: int = 0
    """The most the file may take once the call has run."""
    reserve: int = 0
    """Bytes it may allocate past the file's end (``FALLOC_FL_KEEP_SIZE``)."""
    extra: int = 0
    names: int = 0


class WriteGate:
    """The keeper's end of one child's write gate (the listener fd the child sent)."""

    def __init__(self, listener: int, child: int, numbers: dict[int, str], cap: int) -> None:
        self._fd = listener
        self._child = child
        self._numbers = numbers
        self.cap = cap
        """The child's RLIMIT_FSIZE: no file grows past it, whatever a call asks."""
        self._extra = 0  # approved growth not tied to a file, until the next recount
        self._names = 0  # approved new names, likewise
        self.refused = 0
        """How many calls were answered ENOSPC."""

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def answer(self, quota: ScratchQuota | None) -> str:
        """Answer every call waiting now; why the child must be killed ("" if it need not).
        A call that makes the keeper kill is left unanswered: the child waits on it until
        the kill lands, and never goes on. Without a quota (not set up: the report says so)
        every call goes on."""
        pending = select.poll()
        pending.register(self._fd, select.POLLIN)
        # POLLIN only: once the child is gone the listener reports a hang-up, not a call.
        while any(events & select.POLLIN for _, events in pending.poll(0)):
            buf = bytearray(_NOTIF.size)
            try:
                fcntl.ioctl(self._fd, _IOCTL_RECV, buf)
            except OSError as exc:
                if exc.errno == errno.ENOENT:  # the call was interrupted: nothing to answer
                    continue
                raise
            call, tid, _, nr, _, _, *args = _NOTIF.unpack(buf)
            allowed = True
            if quota is not None:
                allowed, reason = self._decide(quota, tid, self._numbers.get(nr, ""), args)
                if reason:
                    self.refused += 1
                    return reason
            if not allowed:
                self.refused += 1
            error = 0 if allowed else -errno.ENOSPC
            response = _RESP.pack(call, 0, error, _FLAG_CONTINUE if allowed else 0)
            with contextlib.suppress(OSError):  # ENOENT: the child died meanwhile
                fcntl.ioctl(self._fd, _IOCTL_SEND, bytearray(response))
        return ""

    def _decide(
        self, quota: ScratchQuota, tid: int, name: str, args: list[int]
    ) -> tuple[bool, str]:
        # What the calls approved before did to the tree first (a new directory watched
        # before the program can lock it, say): the child waits, nothing changes meanwhile.
        reason = quota.check(recount=False)
        if reason:
            return False, reason
        try:
            charge = self._estimate(quota, tid, name, args)
        except Blind as exc:
            return False, exc.reason
        if charge is None:
            return True, ""
        if not self._fits(quota, charge):
            # The child waits on this call: everything approved before has completed, and
            # a fresh count includes it.
            reason = quota.check()
            self._extra = self._names = 0
            if reason:
                return False, reason
            if not self._fits(quota, charge):
                try:
                    if not (charge.names and _names_existing(tid, name, args)):
                        return False, ""
                except Blind as exc:
                    return False, exc.reason
                charge = _Charge()
        if charge.key is not None:
            quota.charge(charge.key, charge.after, reserve=charge.reserve)
        self._extra += charge.extra
        self._names += charge.names
        return True, ""

    def _fits(self, quota: ScratchQuota, charge: _Charge) -> bool:
        need = charge.extra
        if charge.key is not None:
            need += max(0, charge.after - quota.charged(charge.key))
        if charge.names and quota.entries + self._names + charge.names > MAX_ENTRIES:
            return False
        return quota.total + self._extra + need <= quota.limit

    def _estimate(
        self, quota: ScratchQuota, tid: int, name: str, args: list[int]
    ) -> _Charge | None:
        """What this call may add (``None``: nothing). Raises :class:`Blind`."""
        if name in _NAMES:
            return _Charge(extra=2 * _BLOCK, names=1)
        if name in _BY_PATH:
            arg = _BY_PATH[name]
            most = self.cap if name == "truncate" else _XATTR_MAX
            bound = most if arg < 0 else max(0, min(_signed(args[arg]), most))
            return _Charge(extra=bound + 2 * _BLOCK)
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
            end = self._written_end(tid, name, args, target)
        end = min(end, self.cap)
        if end <= size and not reserve:
            return None  # within the length: a hole filled there was counted already
        blocks = int(target.st.st_blocks) * 512
        past_end = quota.reserved(target.key) + reserve
        after = max(blocks + reserve, max(end, size) + min(past_end, blocks + reserve))
        return _Charge(key=target.key, after=after + _BLOCK, reserve=reserve)

    def _written_end(self, tid: int, name: str, args: list[int], target: OpenFile) -> int:
        """Where a write ends in its file: its start (the end for an append, whatever the
        offset) plus its count; ``cap`` when the count or offset cannot be read."""
        size = target.st.st_size
        appending = bool(target.flags & _O_APPEND)
        if name in _VECTORED:
            count = _iov_total(tid, args[1], args[2])
        else:
            count = args[_COUNT_ARG[name]]
        if count is None:
            return self.cap
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
                return self.cap
            start = struct.unpack("=q", data)[0]
        else:
            start = target.pos
        return start + count


def _names_existing(tid: int, name: str, args: list[int]) -> bool:
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
