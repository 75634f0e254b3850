"""Start a command inside one reference environment: ``python -m tests.environments._wrap``.

    python -m tests.environments._wrap E4 --cgroup DIR --cwd DIR [--uid N --gid N] -- CMD...

Runs as root and shapes itself the way a container runtime shapes a container's first
process, then ``exec``\\ s ``CMD`` (through ``setpriv`` when the identity or capabilities
change), so the command and everything it starts (a ptc host, its zygote, keepers and
children) inherit the environment and cannot leave it. The steps, in the order they need:

1. join ``--cgroup`` (a cgroup v2 directory the harness created): the harness finds and kills
   whatever this run leaves behind there, and nothing else;
2. read-only cgroups: a private mount namespace, every mount under ``/sys/fs/cgroup``
   bind-remounted read-only (this namespace only; the machine's mounts are untouched);
   with ``--overlay DIR``, an overlayfs on ``DIR`` in that namespace, its layers on two small
   tmpfs mounts of their own (its files then report another device than its directories);
3. the seccomp filter (loaded while still root, so ``no_new_privs`` is set only where the
   environment has it);
4. ``chdir`` to ``--cwd``; ``setpriv`` drops uid, groups and capabilities and ``exec``\\ s ``CMD``.
   For root, ``exec`` makes the permitted and effective sets equal to the bounding set (the
   inheritable and ambient sets being empty), so cutting the bounding set is what drops them.

The environment variables pass through unchanged: the harness builds them.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.environments._envs import BY_NAME, Environment

CGROUP_ROOT = "/sys/fs/cgroup"

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEW_FLAGS = (
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
)

DOCKER_REFUSED = (
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "keyctl",
    "bpf",
    "perf_event_open",
)
"""Refused with EPERM by Docker's default profile to a container without CAP_SYS_ADMIN (those
that matter to a sandbox; the profile is an allow-list and refuses more)."""
LANDLOCK_SYSCALLS = ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self")

_MS_RDONLY = 0x1
_MS_REMOUNT = 0x20
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_MOUNT_FLAGS = {
    "nosuid": 0x2,
    "nodev": 0x4,
    "noexec": 0x8,
    "noatime": 0x400,
    "nodiratime": 0x800,
    "relatime": 0x200000,
}
"""Per-mount flags a bind remount must repeat, or the kernel clears them."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def join_cgroup(directory: str) -> None:
    with open(os.path.join(directory, "cgroup.procs"), "w", encoding="ascii") as fh:
        fh.write("0")


def cgroup_mounts() -> list[tuple[str, str]]:
    """``(mount point, per-mount options)`` of every mount at or under ``/sys/fs/cgroup``."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            if point == CGROUP_ROOT or point.startswith(CGROUP_ROOT + "/"):
                found.append((point, fields[5]))
    return found


def make_cgroups_read_only() -> None:
    """A private mount namespace in which every cgroup mount is read-only."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    for point, options in cgroup_mounts():
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for option in options.split(","):
            flags |= _MOUNT_FLAGS.get(option, 0)
        _check(libc.mount(None, point.encode(), None, flags, None), f"remount {point} read-only")


def mount_overlay(target: str) -> None:
    """In a private mount namespace: an overlayfs on ``target`` (mode 1777, like ``/tmp``),
    its lower and upper layers on two 128 MiB tmpfs mounts beside it (``.layers``)."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    layers = Path(target).parent / ".layers"
    for name in ("lower", "upper"):
        (layers / name).mkdir(parents=True)
        where = str(layers / name).encode()
        _check(libc.mount(b"tmpfs", where, b"tmpfs", 0, b"size=128m,mode=1777"), "mount tmpfs")
    for name in ("upper/data", "upper/work"):
        (layers / name).mkdir(mode=0o1777)
        (layers / name).chmod(0o1777)
    options = f"lowerdir={layers}/lower,upperdir={layers}/upper/data,workdir={layers}/upper/work"
    _check(libc.mount(b"overlay", target.encode(), b"overlay", 0, options.encode()), "overlay")


DEPLOYMENT_DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"


def documented_rule() -> set[str]:
    """The system calls the rule of ``docs/deployment.md``'s Docker section allows (the
    first ``json`` block there): what ``docker-ptc`` stops refusing."""
    text = DEPLOYMENT_DOC.read_text(encoding="utf-8")
    section = text.split("## Docker", 1)[1]
    block = section.split("```json\n", 1)[1].split("```", 1)[0]
    rule = json.loads(block)
    if rule.get("action") != "SCMP_ACT_ALLOW" or set(rule) != {"names", "action"}:
        raise SystemExit(f"docs/deployment.md's seccomp rule is not a plain allow: {rule}")
    return set(rule["names"])


def load_seccomp(env: Environment) -> None:
    """Load ``env``'s filter into this process; ``exec`` keeps it, children inherit it."""
    import pyseccomp as sc

    filt = sc.SyscallFilter(defaction=sc.ALLOW)
    if env.seccomp == "no-userns":
        for name in ("unshare", "clone"):
            filt.add_rule(
                sc.ERRNO(errno.EPERM), name, sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
            )
    else:
        allowed = documented_rule() if env.seccomp == "docker-ptc" else set()
        for name in DOCKER_REFUSED:
            if name not in allowed:
                filt.add_rule(sc.ERRNO(errno.EPERM), name)
        # One rule per flag: the rules of a syscall are OR-ed, its comparisons AND-ed.
        for flag in CLONE_NEW_FLAGS:
            filt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        if env.seccomp == "docker-old":
            for name in LANDLOCK_SYSCALLS:
                filt.add_rule(sc.ERRNO(errno.EPERM), name)
    # clone3 passes its flags in memory, which seccomp cannot read: libc falls back to clone.
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    filt.set_attr(sc.Attr.CTL_NNP, int(env.no_new_privs))
    filt.load()


def setpriv_argv(env: Environment, uid: int | None, gid: int | None) -> list[str]:
    """The ``setpriv`` command line that drops to ``env``'s identity (empty: nothing to drop)."""
    args: list[str] = []
    if env.identity != "root":
        if uid is None or gid is None:
            raise SystemExit(f"{env.name} runs as a user: pass --uid and --gid")
        groups = "--init-groups" if env.identity == "user" else "--clear-groups"
        args += [f"--reuid={uid}", f"--regid={gid}", groups]
    if env.capabilities is not None:
        kept = "".join(f",+{cap}" for cap in env.capabilities)
        args += ["--inh-caps=-all", "--ambient-caps=-all", f"--bounding-set=-all{kept}"]
    elif env.identity != "root":
        args += ["--inh-caps=-all"]
    if env.no_new_privs:
        args.append("--no-new-privs")
    if not args:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise SystemExit("setpriv (util-linux) is not on PATH")
    return [setpriv, *args, "--"]


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.environments._wrap")
    parser.add_argument("environment", choices=sorted(BY_NAME))
    parser.add_argument("--cgroup", required=True, help="cgroup v2 directory to join first")
    parser.add_argument("--cwd", required=True, help="working directory of the command")
    parser.add_argument("--uid", type=int, help="uid of a non-root environment")
    parser.add_argument("--gid", type=int, help="gid of a non-root environment")
    parser.add_argument("--overlay", help="mount an overlayfs on this directory first")
    argv = list(argv)
    if "--" not in argv:
        parser.error("no command: end the options with -- CMD ARGS...")
    split = argv.index("--")
    args, command = parser.parse_args(argv[:split]), argv[split + 1 :]
    if not command:
        parser.error("no command after --")
    if os.geteuid() != 0:
        raise SystemExit("the environment wrapper must start as root")
    env = BY_NAME[args.environment]
    join_cgroup(args.cgroup)
    if env.cgroups_read_only:
        make_cgroups_read_only()
    if args.overlay:
        mount_overlay(args.overlay)
    if env.seccomp != "none":
        load_seccomp(env)
    os.chdir(args.cwd)
    full = [*setpriv_argv(env, args.uid, args.gid), *command]
    os.execv(full[0], full)


if __name__ == "__main__":
    main(sys.argv[1:])
