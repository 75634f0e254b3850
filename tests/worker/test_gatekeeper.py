"""The scratch keeper's registration socket: a child's registration names its pid however
early it comes (the keeper refuses one that does not, and that child's gated writes fail)."""

from __future__ import annotations

import os
import socket
import struct

from worker._supervisor._gatekeeper import registration_socketpair

_UCRED = struct.Struct("iII")


def _sender_pid(receiver: socket.socket) -> int:
    _, ancillary, _, _ = receiver.recvmsg(64, socket.CMSG_SPACE(_UCRED.size))
    for level, kind, payload in ancillary:
        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS):
            pid: int = _UCRED.unpack_from(payload)[0]
            return pid
    return 0


def test_a_registration_sent_before_the_keeper_ran_a_line_carries_its_pid() -> None:
    children, keeper = registration_socketpair()
    with children, keeper:
        children.send(b"{}")  # the keeper, just forked, has not run yet
        assert _sender_pid(keeper) == os.getpid()


def test_the_kernel_attaches_no_pid_to_what_was_sent_before_the_keeper_asked() -> None:
    """Why the option is set on the pair, not by the keeper once it runs (the race that
    left a child's first write failing with ENOSYS on a loaded machine)."""
    children, keeper = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with children, keeper:
        children.send(b"{}")
        keeper.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        assert _sender_pid(keeper) == 0
