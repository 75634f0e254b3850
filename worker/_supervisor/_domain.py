"""What the zygote sets up once for every child it forks: the containment state that is the
same for all of them, built once instead of per run (DESIGN section 8).

- **Namespaces.** As root with CAP_SYS_ADMIN (E1) the zygote enters a network and an IPC
  namespace of its own, empty, and stays root in the initial user namespace. Without it
  (a laptop, E2; root with only Docker's capabilities, as ``docs/deployment.md``'s profile
  allows) it enters a user namespace of its own with them (root first becomes uid 65534:
  root is never mapped into a user namespace, where its files would come under the
  namespace's capabilities). Its children inherit both, so a run costs no network namespace
  of its own (creating one costs 0.55 ms here, and its teardown 0.35 ms on a kernel worker).
  Runs share the empty network namespace's abstract unix socket names, which seccomp's
  ``bind``/``connect`` refusal (and Landlock's scope, ABI 6) closes.
- **A pid namespace per child.** The zygote calls ``unshare(CLONE_NEWPID)`` before each fork,
  so each child is pid 1 of a namespace of its own and everything it could leave dies with
  it; the zygote, a subreaper, reaps it (``_supervise``). (A second ``unshare`` is refused
  while the namespace for children is not the caller's own, so the zygote first goes back to
  its own with ``setns``, which needs CAP_SYS_ADMIN over it: a zygote in a user namespace of
  its own therefore lives in a pid namespace of that user namespace too, as its pid 1: the
  process the host started stays outside, only waiting for it and passing a SIGTERM on.)
- **The scratch tmpfs's place.** Where a child can mount a tmpfs (a mount namespace of its
  own), every child mounts it on the same mount point, ``<root>/scratch``, inside its own
  mount namespace: the zygote enters a mount namespace of its own with ``<root>`` made
  read-only there, so the one Landlock rule on ``<root>`` (a rule on the mount point itself
  would not cover a tmpfs mounted on it later) lets a child write its own tmpfs and nothing
  else. The Landlock ruleset is then the same for every child, and built here once (a child
  only restricts itself with it: 0.03 ms instead of 0.6). Without a tmpfs each child has a
  scratch dir of its own beside it, ``<root>/run-<n>``, and builds its own ruleset.

Nothing here is run data: the zygote never sees a program, a call or a result.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from .._kernel import _capabilities, _landlock
from .._kernel._syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MNT_DETACH,
    MS_BIND,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PR_SET_PDEATHSIG,
    map_own_ids,
    mount,
    prctl,
    setns,
    umount,
    unshare,
)
from .._protocol._spawn_config import DomainFacts, ZygoteConfig
from ._scratch import mount_scratch

NOBODY = 65534
CAP_SYS_ADMIN = 21
MOUNT_POINT = "scratch"
"""The name, under the backend's scratch root, where each child mounts its tmpfs."""


@dataclass
class Domain:
    """The zygote's own containment, as its children inherit it (plain data, JSON-able)."""

    namespaces: tuple[str, ...] = ()
    """The zygote's own namespaces, which its children share: ``user``, ``net``, ``ipc``."""
    namespace_error: str = ""
    pidns: bool = False
    """Whether each child gets a pid namespace of its own (the zygote unshares before each
    fork; cleared when that fails)."""
    pidns_fd: int = -1
    """The zygote's own pid namespace, gone back to before each ``unshare``."""
    pid: int = 0
    """The zygote's pid as the host sees it."""
    pidfd: int = -1
    """A pidfd of the zygote itself: a child checks it once it has asked to die with it."""
    tmpfs: bool = False
    tmpfs_error: str = ""
    uid: int = 0
    """The uid the zygote runs as in the initial user namespace (65534 when it dropped)."""
    ruleset_fd: int = -1
    """The children's Landlock ruleset (tmpfs mode), or -1."""
    landlock_abi: int = 0
    landlock_error: str = ""
    read_only: list[str] = field(default_factory=list)

    def facts(self) -> DomainFacts:
        """What a child is told about the domain it is forked into."""
        return {
            "zygote_namespaces": list(self.namespaces),
            "namespace_error": self.namespace_error,
            "tmpfs": self.tmpfs,
            "tmpfs_error": self.tmpfs_error,
            "ruleset_fd": self.ruleset_fd,
            "landlock_abi": self.landlock_abi,
            "landlock_error": self.landlock_error,
            "read_only": self.read_only,
            "zygote_pid": self.pid,
            "zygote_pidfd": self.pidfd,
        }


def enter(cfg: ZygoteConfig, read_only: list[str]) -> Domain:
    """Set up the zygote's domain for the containment ``cfg`` asks for (called once, in the
    zygote, before it forks anything). Never raises: what fails is said in the facts."""
    domain = Domain(read_only=read_only, pid=os.getpid())
    if cfg["namespaces"]:
        _namespaces(domain, cfg)
    else:
        domain.namespace_error = domain.tmpfs_error = "namespaces off"
    domain.uid = os.geteuid()
    domain.pidfd = os.pidfd_open(os.getpid())
    if cfg["landlock"]:
        domain.landlock_abi, domain.landlock_error = _landlock.status(cfg["landlock_abi_limit"])
    else:
        domain.landlock_error = "Landlock off"
    if domain.tmpfs and domain.landlock_abi:
        try:
            domain.ruleset_fd = _landlock.ruleset(
                read_only=read_only,
                read_write=[cfg["root"], "/dev/null"],
                abi=domain.landlock_abi,
            )
        except OSError as exc:
            domain.landlock_abi, domain.landlock_error = 0, str(exc)
    return domain


def _namespaces(domain: Domain, cfg: ZygoteConfig) -> None:
    admin = os.geteuid() == 0 and not _capabilities.missing({"CAP_SYS_ADMIN": CAP_SYS_ADMIN})
    try:
        if admin:
            unshare(CLONE_NEWNET | CLONE_NEWIPC)
            domain.namespaces = ("net", "ipc")
        else:
            _own_user_namespace()  # returns in the zygote proper, pid 1 of its namespace
            domain.namespaces = ("user", "net", "ipc")
            domain.pid = int(os.readlink("/proc/self"))  # /proc is the host's
    except OSError as exc:
        domain.namespace_error = str(exc)
        domain.tmpfs_error = f"no mount namespace ({exc})"
        return
    try:
        domain.pidns_fd = os.open("/proc/self/ns/pid", os.O_RDONLY)
        next_pid_namespace(domain.pidns_fd)
        domain.pidns = True
    except OSError as exc:
        domain.namespace_error = f"no pid namespace ({exc})"
    domain.tmpfs_error = _mount_root(cfg["root"])
    domain.tmpfs = not domain.tmpfs_error


def release_root(root: str) -> None:
    """Undo the read-only view of the scratch root in the zygote's mount namespace, so the
    zygote can remove it (a host that died cannot)."""
    with contextlib.suppress(OSError):
        umount(root, MNT_DETACH)


def next_pid_namespace(own: int) -> None:
    """Make the next fork pid 1 of a pid namespace of its own (``own``: the zygote's)."""
    setns(own, CLONE_NEWPID)
    unshare(CLONE_NEWPID)


def _own_user_namespace() -> None:
    """Enter a user namespace with this process's ids mapped to themselves (root first
    drops to uid 65534, where it can), and a pid namespace of it, whose pid 1 goes on as
    the zygote while this process only waits for it. Raises ``OSError``."""
    if os.geteuid() == 0:
        lacking = _capabilities.missing(_capabilities.UID_DROP_CAPS)
        if lacking:
            raise OSError(
                f"root cannot be mapped into a user namespace, nor drop to uid "
                f"{NOBODY} ({'/'.join(lacking)} dropped)"
            )
        why = _probe(_drop_and_unshare)  # a drop for good only where it leads somewhere
        if why:
            raise OSError(why)
        become_nobody()
    uid, gid = os.geteuid(), os.getegid()
    unshare(_OWN_NAMESPACES)
    map_own_ids(uid, gid)
    zygote = os.fork()
    if zygote == 0:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the host's death reaches it through here
        return
    _wait_for(zygote)


def _wait_for(zygote: int) -> NoReturn:
    """The process the host started, once the zygote proper runs in its own pid namespace:
    it passes a SIGTERM (the host's death) on, and exits when the zygote does."""
    signal.signal(signal.SIGTERM, lambda *_: os.kill(zygote, signal.SIGTERM))
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    while True:
        try:
            _, status = os.waitpid(zygote, 0)
            break
        except InterruptedError:
            continue
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _mount_root(root: str) -> str:
    """Enter a mount namespace of the zygote's own with ``root`` read-only in it, and check
    that a child can mount its tmpfs on the mount point beneath; "" or why not."""
    try:
        unshare(CLONE_NEWNS)
        mount("none", "/", None, MS_REC | MS_PRIVATE, None)
        mount(root, root, None, MS_BIND, None)
        mount(root, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
    except OSError as exc:
        return f"no mount namespace ({exc})"
    return _probe_tmpfs(os.path.join(root, MOUNT_POINT))


def _probe_tmpfs(mount_point: str) -> str:
    """Mount a tiny tmpfs on ``mount_point`` in a fork's own mount namespace, as every child
    will: "" when it worked, else why not."""

    def mount_one() -> str:
        unshare(CLONE_NEWNS)
        return mount_scratch(mount_point, 1, uid=os.geteuid(), gid=os.getegid())

    why = _probe(mount_one)
    return f"no scratch tmpfs ({why})" if why else ""


_OWN_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID


def _drop_and_unshare() -> str:
    """What :func:`_own_user_namespace` does as root, tried in a probe first."""
    become_nobody()
    unshare(_OWN_NAMESPACES)
    map_own_ids(NOBODY, NOBODY)
    return ""


def become_nobody() -> None:
    """Drop every id to 65534 (root with CAP_SETUID and CAP_SETGID)."""
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def _probe(attempt: Callable[[], str]) -> str:
    """Run ``attempt`` in a fork (which then exits): "" when it returned "", else why not."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read)
            why = attempt()
        except BaseException as exc:  # noqa: BLE001 - reported to the zygote
            why = str(exc) or type(exc).__name__
        if why:
            with contextlib.suppress(OSError):
                os.write(write, why.encode("utf-8", "replace")[:2000])
            code = 1
        os._exit(code)
    os.close(write)
    try:
        why = os.read(read, 4096).decode("utf-8", "replace")
    finally:
        os.close(read)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return why or "the probe failed"
    return ""
