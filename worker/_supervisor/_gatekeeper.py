"""The scratch keeper: where no tmpfs can be mounted (no mount namespace: E3, E4, E4d, E6), one
long-lived process of the zygote's keeps every child's scratch quota.

Each child registers itself while it sets itself up, before the program runs: on the
registration socket it inherits from the zygote (``SOCK_SEQPACKET``; the kernel attaches its
pid, ``SCM_CREDENTIALS``) it sends its scratch dir and quota with a copy of its supervisor
line and, where the run requires a full filesystem, the listener of its write gate
(``_scratch_gate``); then it closes the socket. From then on the keeper answers each write
that could grow a scratch file, counts the files (``_scratch_quota``), and when a child must
be killed (the entry cap, a file it cannot see) writes why on the child's line
(``_keeper_lines.Killed``) and kills it. A child that dies is forgotten.

It runs with the children's uid (it drops to 65534 where they do): it lowers their
RLIMIT_FSIZE and reads their ``/proc``, which needs the same credentials. The children cannot
reach it: every call that names another process is refused to them (``_bpf``). It dies with
the zygote (``PR_SET_PDEATHSIG``); a write gate whose keeper is gone fails its writes.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import struct
from typing import Any, NoReturn

from .._kernel._seccomp import growth_syscalls
from .._kernel._syscalls import PR_SET_PDEATHSIG, prctl, set_name
from .._protocol._keeper_lines import Killed
from ._confine import FSIZE_BYTES
from ._scratch_gate import WriteGate
from ._scratch_quota import ScratchQuota

NAME = b"ptc-keeper"
"""The scratch keeper's process name (``/proc/<pid>/comm``)."""
_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid
_MAX_REGISTRATION = 8192


class Quota:
    """The scratch quota of one child: its count, and with its write gate every growing
    write waits for the keeper's answer, else growth is refused after the fact."""

    def __init__(self, scratch: str, child: int, mib: int, listener: int | None) -> None:
        limit = mib * 1024 * 1024
        self.cap = min(FSIZE_BYTES, limit)
        """The child's RLIMIT_FSIZE (it set it itself): no file grows past it."""
        self.watch = ScratchQuota(scratch, child, limit, refuse_growth=listener is None)
        self.gate = (
            None if listener is None else WriteGate(listener, child, growth_syscalls(), self.cap)
        )

    def watched(self) -> list[Any]:
        """What the keeper's loop waits on for this quota."""
        return [w for w in (self.watch, self.gate) if w is not None]

    def handle(self, ready: list[Any]) -> str:
        """Whatever of :meth:`watched` is ready; why the child must be killed ("" if not)."""
        reason = ""
        try:
            if self.watch in ready:
                reason = self.watch.check(recount=self.gate is None)
            if self.gate is not None and self.gate in ready and not reason:
                reason = self.gate.answer(self.watch)
        except Exception as exc:  # never a child left to write on unwatched
            return f"its scratch quota failed: {exc!r}"
        return reason

    def close(self) -> None:
        self.watch.close()
        if self.gate is not None:
            self.gate.close()


class _Entry:
    __slots__ = ("line", "pidfd", "quota")

    def __init__(self, line: int, pidfd: int, quota: Quota) -> None:
        self.line = line
        self.pidfd = pidfd
        self.quota = quota

    def close(self) -> None:
        self.quota.close()
        for fd in (self.line, self.pidfd):
            with contextlib.suppress(OSError):
                os.close(fd)


def registration_socketpair() -> tuple[socket.socket, socket.socket]:
    """The registration socket: the children's end (the zygote's, inherited by each child)
    and the keeper's. The keeper's end asks for its senders' credentials from the start:
    a message sent before the option is set carries none (no pid: the keeper must refuse
    it, and the child's gated writes then fail with ENOSYS), and a child may register
    before the keeper, forked just before it, has run a line."""
    children, keeper = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    keeper.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    return children, keeper


def gatekeeper_main(registrations: socket.socket, drop_to: int | None, zygote: int) -> NoReturn:
    """Entry of the scratch keeper (in the zygote's fork; ``zygote``: its pid, as this process
    sees it). Never returns."""
    code = 0
    try:
        set_name(NAME)
        if drop_to is not None:
            os.setgroups([])
            os.setresgid(drop_to, drop_to, drop_to)
            os.setresuid(drop_to, drop_to, drop_to)
        # Asked after the uid change, which forgets it; then the zygote must still be there.
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != zygote:
            raise OSError("the zygote died")
        _serve(registrations)
    except BaseException:  # noqa: BLE001 - the zygote sees it gone and starts another
        code = 70
    finally:
        os._exit(code)


def _serve(registrations: socket.socket) -> None:
    children: dict[int, _Entry] = {}  # pidfd -> entry
    while True:
        watched: list[Any] = [registrations, *children]
        for entry in children.values():
            watched.extend(entry.quota.watched())
        ready, _, _ = select.select(watched, [], [])
        if registrations in ready:
            registered = _register(registrations)
            if registered is not None:
                children[registered.pidfd] = registered
        for pidfd, entry in list(children.items()):
            if pidfd in ready:  # the child is gone
                entry.close()
                del children[pidfd]
                continue
            reason = entry.quota.handle(ready)
            if reason:
                _kill(entry, reason)


def _register(registrations: socket.socket) -> _Entry | None:
    """One child's registration, or ``None`` for anything else (a malformed message)."""
    fds = array.array("i")
    data, ancillary, _, _ = registrations.recvmsg(
        _MAX_REGISTRATION, socket.CMSG_SPACE(3 * fds.itemsize) + socket.CMSG_SPACE(_UCRED.size)
    )
    pid = 0
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = _UCRED.unpack_from(payload)[0]
    received = list(fds)
    try:
        msg = json.loads(data)
        if pid <= 0 or len(received) not in (1, 2) or not isinstance(msg, dict):
            raise ValueError("not a registration")
        pidfd = os.pidfd_open(pid)
    except (ValueError, OSError):
        for fd in received:
            os.close(fd)
        return None
    listener = received[1] if len(received) == 2 else None
    try:
        quota = Quota(str(msg["scratch"]), pid, int(msg["quota_mib"]), listener)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        why = Killed(reason=f"its scratch quota could not start: {exc}")
        with contextlib.suppress(OSError):
            os.write(received[0], why.to_line())
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        for fd in (*received, pidfd):
            with contextlib.suppress(OSError):
                os.close(fd)
        return None
    return _Entry(received[0], pidfd, quota)


def _kill(entry: _Entry, reason: str) -> None:
    with contextlib.suppress(OSError):
        os.write(entry.line, Killed(reason=reason).to_line())
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(entry.pidfd, signal.SIGKILL)
