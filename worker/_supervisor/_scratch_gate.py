"""The keeper's yes or no to every call that could make the scratch dir take more space,
where no tmpfs holds the scratch quota: a hard quota, as a tmpfs gives, without a mount.

The child loads a seccomp filter (``_gate_filter``) that sends each such call to the keeper
as a user notification and waits; it also refuses new threads, so the child has one thread
and nothing changes its files, offsets or fd table while a call waits. For each call the
keeper computes the most it can make the scratch dir take, as Linux carries it out rather
than as the call seems to ask (``_scratch_calls``: appends at the end whatever their offset,
every ``fallocate`` mode, new names and attributes, only files opened for writing through
the scratch dir's mount), and answers "go on" (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``, Linux
5.5) when the count (``_scratch_quota``) stays within the quota, else ENOSPC, as a full
tmpfs would (also once the scratch dir holds as many names as a tmpfs has inodes). A growth
approved for a file is charged to it at once; growth not tied to a file is kept aside. Both
hold until a recount, which happens only while the child waits on a call: then every
approved call has completed, and what the files take is read again. When the keeper cannot
see what it needs (``_scratch_proc.Blind``), the call is never answered and the keeper kills
the child, naming why.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import struct

from ._scratch_calls import Charge, estimate, names_existing
from ._scratch_proc import Blind
from ._scratch_quota import MAX_ENTRIES, ScratchQuota

_NOTIF = struct.Struct("=QIIiIQ6Q")  # struct seccomp_notif: id, pid, flags, seccomp_data
_RESP = struct.Struct("=QqiI")  # struct seccomp_notif_resp: id, val, error, flags
_IOCTL_RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV
_IOCTL_SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND
_FLAG_CONTINUE = 1


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
        if not name:  # a call the filter sends that this keeper does not know: no
            return False, ""
        try:
            charge = estimate(quota, tid, name, args, self.cap)
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
                    if not (charge.names and names_existing(tid, name, args)):
                        return False, ""
                except Blind as exc:
                    return False, exc.reason
                charge = Charge()
        if charge.key is not None:
            quota.charge(charge.key, charge.after, reserve=charge.reserve)
        self._extra += charge.extra
        self._names += charge.names
        return True, ""

    def _fits(self, quota: ScratchQuota, charge: Charge) -> bool:
        need = charge.extra
        if charge.key is not None:
            need += max(0, charge.after - quota.charged(charge.key))
        if charge.names and quota.entries + self._names + charge.names > MAX_ENTRIES:
            return False
        return quota.total + self._extra + need <= quota.limit
