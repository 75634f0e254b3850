"""The scratch tmpfs of a run: mounted by the child itself, in a mount namespace of its own,
at the run's size (``Limits.scratch_mib``), owned by the uid the child runs as.

Its pages are charged to the memory cgroup of whoever writes them (the child). The size is
the run's from the start: the pool asks for children with the limits of the runs in use,
and a child made for one size never serves a run of another (``_pool``).
"""

from __future__ import annotations

from .._kernel._syscalls import MS_NODEV, MS_NOEXEC, MS_NOSUID, mount

SCRATCH_INODES = 65536


def mount_scratch(path: str, mib: int, *, uid: int, gid: int) -> str:
    """Mount a tmpfs of ``mib`` MiB owned by ``uid``/``gid`` on ``path``, in this process's
    own mount namespace (copied from the zygote's, whose mounts are all private: nothing
    propagates to the host's). Returns "" when it worked, else why not."""
    try:
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        mount("ptc-scratch", path, "tmpfs", flags, _scratch_options(mib, uid, gid))
    except OSError as exc:
        return str(exc)
    return ""


def _scratch_options(mib: int, uid: int, gid: int) -> str:
    return f"size={mib}m,nr_inodes={SCRATCH_INODES},mode=0700,uid={uid},gid={gid}"
