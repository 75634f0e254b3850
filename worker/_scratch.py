"""The scratch tmpfs of a run: mounted by the keeper (in the child's mount namespace),
sized for the run when the host takes the child, owned by the child's uid.

Its pages are charged to the memory cgroup of whoever writes them (the child); its size is
the run's ``Limits.scratch_mib``. As root the tmpfs is mounted in the initial user
namespace, where only a process still there may resize it once the keeper has a user
namespace of its own: the :class:`Resizer` helper, forked before that, does it.
"""

from __future__ import annotations

import contextlib
import os
import signal

from ._syscalls import (
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    MS_REMOUNT,
    PR_SET_PDEATHSIG,
    mount,
    prctl,
)

SCRATCH_INODES = 65536
INITIAL_SCRATCH_MIB = 1
"""The scratch tmpfs of a pooled child until the host takes it and sends the run's
``Limits.scratch_mib`` (small, so a resize that fails leaves no large quota behind)."""


def mount_scratch(path: str, mib: int, *, uid: int, gid: int) -> str:
    """Mount a tmpfs of ``mib`` MiB owned by ``uid``/``gid`` on the scratch dir, in this
    process's own mount namespace (made private first, so nothing propagates to the
    host's). Its pages are charged to the memory cgroup of whoever writes them: the
    child. Returns "" when it worked, else why not (the run then has only the per-file
    RLIMIT_FSIZE)."""
    try:
        mount("none", "/", None, MS_REC | MS_PRIVATE, None)
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        mount("ptc-scratch", path, "tmpfs", flags, _scratch_options(mib, uid, gid))
    except OSError as exc:
        return str(exc)
    return ""


def resize_scratch(path: str, mib: int) -> str:
    """Set the scratch tmpfs to ``mib`` MiB (the run's ``Limits.scratch_mib``); "" or why not."""
    st = os.stat(path)
    try:
        flags = MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC
        mount("ptc-scratch", path, None, flags, _scratch_options(mib, st.st_uid, st.st_gid))
    except OSError as exc:
        return str(exc)
    return ""


def _scratch_options(mib: int, uid: int, gid: int) -> str:
    return f"size={mib}m,nr_inodes={SCRATCH_INODES},mode=0700,uid={uid},gid={gid}"


def sized_already(sized: int, mib: int) -> str:
    """The resize of a tmpfs mounted at the run's size already: "" for that size only."""
    if mib == sized:
        return ""
    return f"the scratch tmpfs was made for {sized} MiB, and cannot be resized to {mib} MiB"


class Resizer:
    """The keeper's end of the scratch resizer: one size out, one answer back."""

    def __init__(self, to_helper: int, from_helper: int, pid: int) -> None:
        self._to = to_helper
        self._from = from_helper
        self._pid = pid

    def resize(self, mib: int) -> str:
        try:
            os.write(self._to, f"{mib}\n".encode())
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = os.read(self._from, 4096)
                if not chunk:
                    return "the scratch resizer exited"
                answer += chunk
        except OSError as exc:
            return f"the scratch resizer is gone: {exc}"
        finally:
            for fd in (self._to, self._from):
                with contextlib.suppress(OSError):
                    os.close(fd)
            # Reaped now, not at the keeper's end: a pooled child is primed (and its
            # tmpfs sized) long before its run, and no zombie may wait that long.
            with contextlib.suppress(OSError):
                os.waitpid(self._pid, 0)
        return answer.decode("utf-8", "replace").strip()


def start_resizer(scratch: str, keep: tuple[int, ...]) -> Resizer | None:
    """Fork the helper (root, initial user namespace, the child's mount namespace): it reads
    one size, resizes the scratch tmpfs, answers "" or why not, and exits. It dies with the
    keeper (PDEATHSIG), holds none of the run's fds, and the keeper's sweep reaps it."""
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (to_r, to_w, from_r, from_w):
            os.close(fd)
        return None
    if pid == 0:
        code = 0
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            for fd in (*keep, to_w, from_r):
                os.close(fd)
            data = os.read(to_r, 64)
            if data:
                os.write(from_w, resize_scratch(scratch, int(data)).encode() + b"\n")
        except BaseException:  # noqa: BLE001 - the keeper reports "exited"
            code = 1
        finally:
            os._exit(code)
    os.close(to_r)
    os.close(from_w)
    return Resizer(to_w, from_r, pid)
