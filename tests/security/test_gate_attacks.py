"""The keeper's write gate under attack (issue 27), with the default ``Containment()``, in
every reference environment where no tmpfs can be mounted and the keeper's gate holds the
scratch quota (E3, E4, E4d, E6; simulated per process by ``tests.environments``).

Each attack is a program through ``run_code`` with ``scratch_mib=8``, written as the red
team ran it: appends with an offset (``pwrite``/``pwritev`` on ``O_APPEND``, ``RWF_APPEND``),
files reached only through a shared mapping (their length set by ``fallocate`` of the last
page), a keeper blinded (the child non-dumpable, or its keeper's RLIMIT_NOFILE lowered),
a scratch dir on overlayfs (its files on another device than the dir), extended attributes;
and what this work found besides: directories (a block each), the preallocating ioctl, a
directory its keeper may not read. Every one fails: the program gets
ENOSPC (EFBIG, or a refusal of the call itself) and holds, by its own count, at most the
quota; or its keeper kills it and the run says why. A program reports what it holds (its
names, its fds, what it mapped) because ``/proc`` is closed to it.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from tests.environments import Harness, HostRun
from worker import Limits

pytestmark = pytest.mark.slow

GATED = ("E3", "E4", "E4d", "E6")
QUOTA_MIB = 8
MIB = 1 << 20

PRELUDE = """
import ctypes, errno, os, resource, stat
MIB = 1 << 20
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t] + [ctypes.c_int] * 3 + [ctypes.c_long]
mapped = [0]
fds = []

def fallocate(fd, mode, offset, length):
    if libc.fallocate(fd, mode, ctypes.c_long(offset), ctypes.c_long(length)) != 0:
        raise OSError(ctypes.get_errno(), "fallocate")

def map_fill(fd, size):
    address = libc.mmap(None, size, 3, 1, fd, 0)  # read-write, shared
    if address in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    ctypes.memset(address, 1, size)
    mapped[0] += size

def held():
    seen = {}
    for top, dirs, files in os.walk("."):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            length = st.st_size if stat.S_ISREG(st.st_mode) else 0
            seen[(st.st_dev, st.st_ino)] = max(length, st.st_blocks * 512)
    for fd in fds:
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        seen[(st.st_dev, st.st_ino)] = max(st.st_size, st.st_blocks * 512)
    return sum(seen.values()) + mapped[0]

def report(exc=None, **more):
    error = None if exc is None else errno.errorcode.get(exc.errno, str(exc))
    return {"held": held(), "error": error, **more}
"""

APPEND = """
try:
    for i in range(50):
        append = 0 if HOW == "rwf" else os.O_APPEND
        fd = os.open(f"a{i}", os.O_CREAT | os.O_WRONLY | append, 0o600)
        os.unlink(f"a{i}")
        fds.append(fd)
        for _ in range(4):
            if HOW == "pwrite":
                os.pwrite(fd, b"x" * MIB, 0)
            elif HOW == "pwritev":
                os.pwritev(fd, [b"x" * MIB], 0)
            else:
                os.pwritev(fd, [b"x" * MIB], 0, os.RWF_APPEND)
except OSError as e:
    return report(e)
return report()
"""

MAPPED = """
try:
    for i in range(60):
        if HOW == "o_tmpfile":
            fd = os.open(".", os.O_TMPFILE | os.O_RDWR, 0o600)
        else:
            fd = os.open(f"m{i}", os.O_CREAT | os.O_RDWR, 0o600)
        fallocate(fd, 0, SIZE - 4096, 4096)  # its last page: the length becomes SIZE
        if HOW == "unlinked":
            os.unlink(f"m{i}")
        map_fill(fd, SIZE)
        os.close(fd)
except OSError as e:
    return report(e)
return report()
"""

BLIND = """
PR_SET_DUMPABLE = 4
blinded = []

def blind(on):
    try:
        if HOW == "dumpable":
            if libc.prctl(PR_SET_DUMPABLE, 0 if on else 1, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl")
        elif on:
            resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (3, 3))
        blinded.append(on)
    except OSError as e:
        blinded.append(errno.errorcode.get(e.errno))

try:
    for i in range(50):
        fd = os.open(f"h{i}", os.O_CREAT | os.O_WRONLY, 0o600)
        os.unlink(f"h{i}")
        fds.append(fd)
        for _ in range(4):
            try:
                os.write(fd, b"x" * MIB)
            except OSError as e:
                if e.errno != errno.ENOSPC or len(blinded) > 20:
                    raise
                blind(True)  # the keeper must now recount what it cannot see
                try:
                    os.write(fd, b"x")
                except OSError:
                    pass
                blind(False)
except OSError as e:
    return report(e, blinded=blinded[:4])
return report(blinded=blinded[:4])
"""

NAMES = """
try:
    for i in range(4000):
        if HOW == "mkdir":
            os.mkdir(f"d{i}")
        else:
            open(f"x{i}", "w").close()
            os.setxattr(f"x{i}", "user.k", b"v" * 3000)
except OSError as e:
    return report(e)
return report()
"""

RESVSP = """
import fcntl, struct
try:
    for i in range(40):
        fd = os.open(f"r{i}", os.O_CREAT | os.O_RDWR, 0o600)
        fds.append(fd)
        fcntl.ioctl(fd, 0x4030582A, struct.pack("@hhqqiI4i", 0, 0, 0, 8 * MIB, 0, 0, 0, 0, 0, 0))
except OSError as e:
    return report(e)
return report()
"""

HIDDEN = """
try:
    for i in range(40):
        os.mkdir(f"c{i}", 0o300)  # its files can be made and opened, not listed
        fd = os.open(f"c{i}/f", os.O_CREAT | os.O_WRONLY, 0o600)
        fds.append(fd)
        os.write(fd, b"x" * MIB)
        os.write(fd, b"x" * MIB)
        os.close(fd)
        fds.pop()
except OSError as e:
    return report(e)
return report()
"""

FLOOD = """
try:
    for i in range(40):
        fd = os.open(f"f{i}", os.O_CREAT | os.O_WRONLY, 0o600)
        fds.append(fd)
        for _ in range(4):
            os.write(fd, b"x" * MIB)
except OSError as e:
    return report(e, other_device=os.stat(".").st_dev != os.fstat(fds[0]).st_dev)
return report()
"""


def _program(body: str, **names: str) -> str:
    for name, value in names.items():
        body = body.replace(name, value)
    return PRELUDE + body


REFUSED = "refused"
"""The program got ENOSPC, EFBIG or a refusal of the call itself, and holds at most the quota."""
KILLED = "killed by the scratch keeper: its scratch quota could not be kept: "
"""The keeper could not see what it needed and killed the child, saying so."""

ATTACKS: dict[str, tuple[str, frozenset[str]]] = {
    **{
        f"append-{how}": (_program(APPEND, HOW=repr(how)), frozenset({"ENOSPC"}))
        for how in ("pwrite", "pwritev", "rwf")
    },
    **{
        f"mapped-{how}-{size}": (
            _program(MAPPED, HOW=repr(how), SIZE=size),
            # O_TMPFILE may be refused outright (the child's base filter).
            frozenset({"ENOSPC", "ENOTSUP", "EPERM"} if how == "o_tmpfile" else {"ENOSPC"}),
        )
        for how in ("o_tmpfile", "unlinked")
        for size in ("MIB", "8 * MIB")
    },
    # Blinding may be refused outright (the child's base filter); then it goes on, refused.
    "blind-dumpable": (_program(BLIND, HOW="'dumpable'"), frozenset({KILLED, "ENOSPC"})),
    "blind-prlimit": (_program(BLIND, HOW="'prlimit'"), frozenset({KILLED, "ENOSPC"})),
    "mkdir": (_program(NAMES, HOW="'mkdir'"), frozenset({"ENOSPC"})),
    "xattr": (_program(NAMES, HOW="'xattr'"), frozenset({"ENOSPC", "ENOTSUP", "EPERM"})),
    "ioctl-resvsp64": (_program(RESVSP), frozenset({"ENOTSUP"})),
    "unreadable-directory": (_program(HIDDEN), frozenset({KILLED})),
}
ON_OVERLAY: dict[str, tuple[str, frozenset[str]]] = {
    "overlay-flood": (_program(FLOOD), frozenset({"ENOSPC"})),
    "overlay-mapped": (_program(MAPPED, HOW="'unlinked'", SIZE="MIB"), frozenset({"ENOSPC"})),
    "overlay-append": (_program(APPEND, HOW="'pwrite'"), frozenset({"ENOSPC"})),
}


@functools.cache
def _attacks(envsim: Harness, env: str, overlay: bool) -> tuple[HostRun, tuple[str, ...]]:
    attacks = ON_OVERLAY if overlay else ATTACKS
    programs = [code for code, _ in attacks.values()]
    limits = Limits(scratch_mib=QUOTA_MIB, wall_seconds=20.0, cpu_seconds=10.0)
    run = envsim.run_code(env, programs, limits=limits, overlay_tmp=overlay, timeout_s=300.0)
    return run, tuple(attacks)


def _outcome(run: HostRun, names: tuple[str, ...], attack: str) -> dict[str, Any]:
    result = run.results[names.index(attack)]
    if result["is_error"]:
        return {"killed": result["error"]["message"]}
    value: dict[str, Any] = result["value"]["result"]
    return value


def _check(outcome: dict[str, Any], allowed: frozenset[str]) -> None:
    if "killed" in outcome:
        assert KILLED in allowed and KILLED in outcome["killed"], outcome
        return
    assert outcome["error"] in allowed, outcome
    assert outcome["held"] <= QUOTA_MIB * MIB, outcome


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("env", GATED)
def test_the_write_gate_holds(envsim: Harness, env: str, attack: str) -> None:
    run, names = _attacks(envsim, env, False)
    outcome = _outcome(run, names, attack)
    _check(outcome, ATTACKS[attack][1])
    if attack == "unreadable-directory":
        assert "cannot watch" in outcome["killed"] and "Permission denied" in outcome["killed"]
    assert run.survivors == () and run.leftovers == ()


@pytest.mark.parametrize("attack", sorted(ON_OVERLAY))
@pytest.mark.parametrize("env", GATED)
def test_on_overlayfs_the_mount_decides_what_is_scratch(
    envsim: Harness, env: str, attack: str
) -> None:
    run, names = _attacks(envsim, env, True)
    outcome = _outcome(run, names, attack)
    _check(outcome, ON_OVERLAY[attack][1])
    if attack == "overlay-flood":
        assert outcome["other_device"], outcome  # the setup the attack needs
    assert run.survivors == ()


@pytest.mark.parametrize("env", GATED)
def test_every_attack_ran_under_the_keepers_gate(envsim: Harness, env: str) -> None:
    run, _ = _attacks(envsim, env, False)
    for result in run.results:
        fs = result["meta"]["enforcement"]["filesystem"]
        assert fs["level"] == "full" and "keeper scratch quota" in fs["mechanism"], fs
