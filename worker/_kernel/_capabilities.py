"""What this process may do as root: its effective capabilities, read and dropped.

The keeper drops the child to uid 65534 only when it has what that takes (a container with
``drop: [ALL]`` runs as uid 0 without CAP_CHOWN, CAP_SETUID or CAP_SETGID, and ``chown``
would fail); the child gives up every capability it still has before the program runs, so
a child left as root (no uid drop, no user namespace) holds none of root's powers. Standard
library only: the keeper and the child run it in the zygote's fork.
"""

from __future__ import annotations

import ctypes
import os

from ._syscalls import libc

CAP_CHOWN = 0
CAP_SETGID = 6
CAP_SETUID = 7
UID_DROP_CAPS = {"CAP_CHOWN": CAP_CHOWN, "CAP_SETGID": CAP_SETGID, "CAP_SETUID": CAP_SETUID}
"""What dropping to uid 65534 takes: ``chown`` of the scratch dir, then the id changes."""

_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


def effective() -> int:
    """This process's effective capability set, as a bit mask (0 when unreadable)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def missing(caps: dict[str, int]) -> list[str]:
    """The names in ``caps`` this process does not have."""
    have = effective()
    return [name for name, bit in caps.items() if not have >> bit & 1]


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_capset = libc.capset  # bound here, in the zygote: a child's own lookup costs it page faults
_prctl = libc.prctl
_NO_CAPABILITIES = (_Header(_LINUX_CAPABILITY_VERSION_3, 0), (_Data * 2)())
"""``capset``'s arguments for "none at all" (pid 0: the calling thread), made once."""


def drop_all() -> None:
    """Empty this thread's effective, permitted, inheritable and ambient sets (for good:
    what is not permitted cannot come back). Raises ``OSError``."""
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before 4.3
    header, data = _NO_CAPABILITIES
    if _capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
