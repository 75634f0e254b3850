"""What the kernel really allows the process that runs this file, as one JSON object.

Standard library only: the harness runs this file's source as a host script in each
environment (with the test venv's interpreter), and ``test_environments.py`` compares the
answer with the table of ``shared/reference/environments.md``. Each check is what ptc's
worker would try: a user namespace, a mount namespace, ``clone3``, a cgroup under its own,
Landlock's version query. Namespace attempts happen in a forked child, so the probe itself
stays as it started. ``sys.argv[1]``, when given, is a JSON file: ``{"descend": N}`` runs the
probe again N levels down (each a new session), and reports the deepest one under ``"child"``.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

CAPABILITY_NAMES = (
    "chown dac_override dac_read_search fowner fsetid kill setgid setuid setpcap "
    "linux_immutable net_bind_service net_broadcast net_admin net_raw ipc_lock ipc_owner "
    "sys_module sys_rawio sys_chroot sys_ptrace sys_pacct sys_admin sys_boot sys_nice "
    "sys_resource sys_time sys_tty_config mknod lease audit_write audit_control setfcap "
    "mac_override mac_admin syslog wake_alarm block_suspend audit_read perfmon bpf "
    "checkpoint_restore"
).split()
"""Capability numbers 0..40, named as ``setpriv`` and ``capabilities(7)`` name them."""

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
SYS_CLONE3 = 435
SYS_LANDLOCK_CREATE_RULESET = 444
LANDLOCK_CREATE_RULESET_VERSION = 1
CGROUP_ROOT = "/sys/fs/cgroup"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def capabilities(mask: int) -> list[str]:
    """The names of the bits set in a capability mask (unknown bits as ``cap_N``)."""
    return [
        CAPABILITY_NAMES[bit] if bit < len(CAPABILITY_NAMES) else f"cap_{bit}"
        for bit in range(64)
        if mask >> bit & 1
    ]


def _status() -> dict[str, str]:
    with open("/proc/self/status", encoding="ascii") as fh:
        return dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)


def _errno_name(code: int) -> str:
    return "ok" if code == 0 else errno.errorcode.get(code, str(code))


def _in_child(flags: int) -> str:
    """``unshare(flags)`` in a forked child: ``ok`` or the errno's name."""
    pid = os.fork()
    if pid == 0:
        code = 0 if _libc.unshare(flags) == 0 else ctypes.get_errno()
        os._exit(code if 0 <= code < 256 else 255)
    _, status = os.waitpid(pid, 0)
    return _errno_name(os.waitstatus_to_exitcode(status))


def _clone3() -> str:
    """``clone3(NULL, 0)``: EINVAL from the kernel (size too small), ENOSYS from a filter."""
    result = _libc.syscall(SYS_CLONE3, None, ctypes.c_size_t(0))
    return _errno_name(0 if result >= 0 else ctypes.get_errno())


def _landlock_abi() -> int | str:
    """Landlock's ABI version, or the errno's name when the query is refused."""
    result = _libc.syscall(
        SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION
    )
    return int(result) if result >= 0 else _errno_name(ctypes.get_errno())


def _own_cgroup_v2() -> str | None:
    with open("/proc/self/cgroup", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("0::"):
                path = line.strip()[3:].lstrip("/")
                for mount in (os.path.join(CGROUP_ROOT, "unified"), CGROUP_ROOT):
                    if os.path.exists(os.path.join(mount, "cgroup.procs")):
                        return os.path.join(mount, path)
    return None


def _cgroup_mkdir() -> str:
    """Create (and remove) a cgroup under this process's own v2 cgroup: ``ok`` or errno."""
    base = _own_cgroup_v2()
    if base is None:
        return "no-cgroup2"
    probe = os.path.join(base, f"envsim-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError as exc:
        return _errno_name(exc.errno or 0)
    os.rmdir(probe)
    return "ok"


def _cgroup_mount_options() -> dict[str, str]:
    out = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if fields[4] == CGROUP_ROOT or fields[4].startswith(CGROUP_ROOT + "/"):
                out[fields[4]] = fields[5].split(",")[0]
    return out


def probe() -> dict[str, Any]:
    """This process's row of the environments table."""
    status = _status()
    uids = [int(x) for x in status["Uid"].split()]
    gids = [int(x) for x in status["Gid"].split()]
    caps = {
        name: capabilities(int(status[field], 16))
        for name, field in (
            ("effective", "CapEff"),
            ("permitted", "CapPrm"),
            ("bounding", "CapBnd"),
            ("inheritable", "CapInh"),
            ("ambient", "CapAmb"),
        )
    }
    return {
        "uids": uids,
        "gids": gids,
        "groups": sorted(os.getgroups()),
        "capabilities": caps,
        "no_new_privs": int(status["NoNewPrivs"]),
        "seccomp": int(status["Seccomp"]),
        "unshare_user": _in_child(CLONE_NEWUSER),
        "unshare_mount": _in_child(CLONE_NEWNS),
        "clone3": _clone3(),
        "cgroup_mkdir": _cgroup_mkdir(),
        "cgroup_mounts": _cgroup_mount_options(),
        "landlock_abi": _landlock_abi(),
        "session": os.getsid(0),
    }


def main() -> None:
    options: dict[str, Any] = {}
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as fh:
            options = json.load(fh) or {}
    row = probe()
    depth = int(options.get("descend", 0))
    if depth:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
            json.dump({"descend": depth - 1}, tmp)
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), tmp.name],
            capture_output=True,
            check=True,
            start_new_session=True,
        )
        os.unlink(tmp.name)
        row["child"] = json.loads(out.stdout)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
