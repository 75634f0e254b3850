"""The keeper's yes or no to every call that could make a scratch file longer, where no tmpfs
holds the scratch quota: a hard quota, as a tmpfs gives, without a mount.

The child loads a seccomp filter (``_seccomp.install_write_gate``) that sends each call of
``GROWTH_SYSCALLS`` to the keeper as a user notification and waits; it also refuses new
threads, so the child has one thread and nothing changes its files, offsets or fd table
while a call waits. For each call the keeper finds the file (``/proc/<child>/fd/<fd>``: not
a regular file in the scratch dir's filesystem means no growth there), computes the most it
can grow the files' total (from the offset, the count and the file's size; where the count
is in memory the child holds, writev, the file's RLIMIT_FSIZE headroom), and answers "go
on" (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``, Linux 5.5) when the total stays within the quota,
else ENOSPC, as a full tmpfs would. Approved growth not yet seen by the count
(``_scratch_quota``) is kept aside until the count is refreshed, which happens only while
the child waits on a call: then every approved call has completed and is counted.

Shared mappings cannot make a file longer, and any block they fill lies within a length the
count already includes (a file takes ``max(length, blocks)``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import stat
import struct

from ._scratch_quota import ScratchQuota

_NOTIF = struct.Struct("=QIIiIQ6Q")  # struct seccomp_notif: id, pid, flags, seccomp_data
_RESP = struct.Struct("=QqiI")  # struct seccomp_notif_resp: id, val, error, flags
_IOCTL_RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV
_IOCTL_SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND
_FLAG_CONTINUE = 1
_BLOCK = 4096
"""Slack per growing call: a file's allocated blocks may pass its length by a block."""
_O_APPEND = 0o2000
_TARGET_ARG = {"copy_file_range": 2, "splice": 2}
"""Which argument is the file written to (the first one for the others but truncate)."""
_COUNT_ARG = {"write": 2, "pwrite64": 2, "sendfile": 3, "copy_file_range": 4, "splice": 4}


class WriteGate:
    """The keeper's end of one child's write gate (the listener fd the child sent)."""

    def __init__(self, listener: int, child: int, numbers: dict[int, str], cap: int) -> None:
        self._fd = listener
        self._child = child
        self._numbers = numbers
        self.cap = cap
        """The child's RLIMIT_FSIZE: no file grows past it, whatever a call asks."""
        self._unsettled = 0
        self.refused = 0
        """How many calls were answered ENOSPC."""

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def answer(self, quota: ScratchQuota | None) -> str:
        """Answer every call waiting now; why the child must be killed ("" if it need not:
        the count found more names than the quota allows)."""
        reason = ""
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
                allowed, why = self._decide(quota, tid, self._numbers.get(nr, ""), args)
                reason = reason or why
            if not allowed:
                self.refused += 1
            error = 0 if allowed else -errno.ENOSPC
            response = _RESP.pack(call, 0, error, _FLAG_CONTINUE if allowed else 0)
            with contextlib.suppress(OSError):  # ENOENT: the child died meanwhile
                fcntl.ioctl(self._fd, _IOCTL_SEND, bytearray(response))
        return reason

    def _decide(
        self, quota: ScratchQuota, tid: int, name: str, args: list[int]
    ) -> tuple[bool, str]:
        growth = self._growth(quota, tid, name, args)
        if growth <= 0:
            return True, ""
        reason = ""
        if quota.total + self._unsettled + growth > quota.limit:
            # The child waits on this call: everything approved before has completed, and
            # a fresh count includes it.
            reason = quota.check()
            self._unsettled = 0
        if quota.total + self._unsettled + growth > quota.limit:
            return False, reason
        self._unsettled += growth
        return True, reason

    def _growth(self, quota: ScratchQuota, tid: int, name: str, args: list[int]) -> int:
        """The most this call can add to the files' total (0: it writes no scratch file)."""
        if name == "truncate":  # by path: whichever file it is, by at most its new length
            return min(_signed(args[1]), self.cap) + _BLOCK
        fd = args[_TARGET_ARG.get(name, 0)] & 0xFFFFFFFF
        try:
            st = os.stat(f"/proc/{tid}/fd/{fd}")
        except (FileNotFoundError, NotADirectoryError):
            return 0  # not an open fd: the call fails by itself
        except OSError:  # cannot see it: it may be a scratch file, as large as it may grow
            return self.cap + _BLOCK
        if not stat.S_ISREG(st.st_mode) or st.st_dev != quota.dev:
            return 0
        size = st.st_size
        if name == "ftruncate":
            end = _signed(args[1])
        elif name == "fallocate":  # may allocate blocks past the length (KEEP_SIZE)
            return max(0, min(_signed(args[3]), self.cap)) + _BLOCK
        elif name == "pwrite64":
            end = _signed(args[3]) + args[2]
        elif name in ("writev", "pwritev", "pwritev2"):
            total = _iov_total(tid, args[1], args[2])
            start = _signed(args[3]) if name != "writev" else self._position(tid, fd, size)
            if name == "pwritev2" and _signed(args[3]) == -1:  # -1: at the file's offset
                start = self._position(tid, fd, size)
            end = self.cap if total is None else start + total
        elif name in _COUNT_ARG and not (name in _TARGET_ARG and args[3]):
            end = self._position(tid, fd, size) + args[_COUNT_ARG[name]]
        else:  # an offset the child holds in memory: the file's headroom
            end = self.cap
        return max(0, min(end, self.cap) - size) + _BLOCK if end > size else 0

    def _position(self, tid: int, fd: int, size: int) -> int:
        """Where a plain write on ``fd`` lands: its offset, or the end for O_APPEND."""
        try:
            with open(f"/proc/{tid}/fdinfo/{fd}", encoding="ascii") as fh:
                info = dict(line.split(":", 1) for line in fh if ":" in line)
            if int(info["flags"].strip(), 8) & _O_APPEND:
                return size
            return int(info["pos"].strip())
        except (OSError, ValueError, KeyError):
            return self.cap  # unknown: the most it could be


_IOV = struct.Struct("=QQ")  # struct iovec: base, length
_IOV_MAX = 1024


def _iov_total(tid: int, address: int, count: int) -> int | None:
    """The bytes a vectored write of ``count`` iovecs at ``address`` (the waiting child's
    memory) carries; ``None`` when unreadable (the caller assumes the most)."""
    if not 0 <= count <= _IOV_MAX:
        return None
    try:
        fd = os.open(f"/proc/{tid}/mem", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.pread(fd, count * _IOV.size, address)
    except (OSError, OverflowError):
        return None
    finally:
        os.close(fd)
    if len(data) != count * _IOV.size:
        return None
    total: int = sum(length for _, length in _IOV.iter_unpack(data))
    return total


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value
