"""Classic BPF as seccomp reads it, and the per-child filter that keeps a program to itself.

Without a pid namespace a program shares the pid space with its host, its keeper and other
runs, often under the same uid. Every system call that names another process is then a way
out: a signal, a lowered rlimit (the red team killed a host by setting its RLIMIT_CPU), a
nice value, a CPU mask, a scheduling class, an I/O priority, a page migration. The per-child
filter (:func:`self_filter`) allows each call of :data:`SELF_RULES` only when every argument
that names a process names the caller itself: its own pid, or 0 where the kernel reads 0 as
"the caller" (never where 0 means a process group); an argument that says *what kind* of
target the call addresses (``setpriority``'s ``which``) must say "a process", never a group or
a user. Every argument is compared on all 64 bits (the kernel reads 32: a value with high bits
set is refused, never truncated to another pid). The review of the system call table behind
this list is in docs/security.md ("System calls that name another process").

The filter is built once (in the zygote) for a placeholder pid and chained in front of the
base filter (:func:`chain`: one program, so the kernel prepares, compiles and caches one
filter per child, not two); each child patches its own pid into the constants
(:func:`pid_offsets`) and loads the whole with one system call.
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass

# linux/filter.h, linux/seccomp.h
LD_W_ABS = 0x20
JEQ_K = 0x15
JSET_K = 0x45
RET_K = 0x06
JA = 0x05
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
ARCH_OFFSET = 4
NR_OFFSET = 0
_ARGS_OFFSET = 16  # seccomp_data.args[0]; each argument is 8 bytes, little-endian


def arg_low(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` in ``seccomp_data`` (x86_64, aarch64)."""
    return _ARGS_OFFSET + 8 * index


def arg_high(index: int) -> int:
    """Offset of the high 32 bits of argument ``index``."""
    return _ARGS_OFFSET + 8 * index + 4


def pack(program: list[tuple[int, int, int, int]]) -> bytes:
    """Instructions ``(code, jt, jf, k)`` as the packed ``sock_filter`` array."""
    return b"".join(struct.pack("=HBBI", *ins) for ins in program)


PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1


@dataclass(frozen=True)
class SelfRule:
    """A system call allowed only when it names the calling process."""

    syscall: str
    pid_args: tuple[int, ...]
    """The arguments that name a process: each must be the caller's pid (or 0, below)."""
    zero_is_self: bool = True
    """Whether 0 in those arguments means the caller (``prlimit64``) rather than a process
    group (``kill``)."""
    which: tuple[int, int] | None = None
    """``(argument, value)``: the argument that says what the pid names must say a process."""


SELF_RULES: tuple[SelfRule, ...] = (
    # Signals: 0 and -1 mean a process group and every process.
    SelfRule("kill", (0,), zero_is_self=False),
    SelfRule("tgkill", (0,), zero_is_self=False),
    SelfRule("rt_sigqueueinfo", (0,), zero_is_self=False),
    SelfRule("rt_tgsigqueueinfo", (0,), zero_is_self=False),
    SelfRule("pidfd_open", (0,), zero_is_self=False),
    # Resource limits, read or written (reading another run's limits found it).
    SelfRule("prlimit64", (0,)),
    # Priorities: PRIO_PGRP and PRIO_USER (0: every process of the caller's uid) refused.
    SelfRule("setpriority", (1,), which=(0, PRIO_PROCESS)),
    SelfRule("getpriority", (1,), which=(0, PRIO_PROCESS)),
    SelfRule("ioprio_set", (1,), which=(0, IOPRIO_WHO_PROCESS)),
    SelfRule("ioprio_get", (1,), which=(0, IOPRIO_WHO_PROCESS)),
    # Scheduling, set or read.
    SelfRule("sched_setaffinity", (0,)),
    SelfRule("sched_getaffinity", (0,)),
    SelfRule("sched_setscheduler", (0,)),
    SelfRule("sched_getscheduler", (0,)),
    SelfRule("sched_setparam", (0,)),
    SelfRule("sched_getparam", (0,)),
    SelfRule("sched_setattr", (0,)),
    SelfRule("sched_getattr", (0,)),
    SelfRule("sched_rr_get_interval", (0,)),
    # Memory of another process: its robust futex list, its pages' NUMA nodes.
    SelfRule("get_robust_list", (0,)),
    SelfRule("migrate_pages", (0,)),
    SelfRule("move_pages", (0,)),
    # Process groups and sessions: no joining another's group, no reading another's ids.
    SelfRule("setpgid", (0, 1)),
    SelfRule("getpgid", (0,)),
    SelfRule("getsid", (0,)),
)
"""Every system call that names another process and is not refused outright by the base
filter (``_seccomp.DENIED_SYSCALLS``: ``ptrace``, ``process_vm_*``, ``kcmp``,
``pidfd_send_signal``, ``pidfd_getfd``, ``process_madvise``, ``process_mrelease``, ``tkill``)."""

PLACEHOLDER_PID = 0x7FFFFFFE
"""The pid the template is built for; a child patches its own in (:func:`pid_offsets`)."""


class Assembler:
    """Instructions with symbolic jump targets, resolved to the 8-bit offsets BPF takes
    (forward only; the write gate's filter, ``_gate_filter``, is written with it too)."""

    def __init__(self) -> None:
        self._code: list[tuple[int, int | str, int | str, int]] = []
        self._labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self._labels[name] = len(self._code)

    def emit(self, code: int, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self._code.append((code, jt, jf, k))

    def program(self) -> bytes:
        out = []
        for at, (code, jt, jf, k) in enumerate(self._code):
            offsets = []
            for target in (jt, jf):
                offset = target if isinstance(target, int) else self._labels[target] - at - 1
                if not 0 <= offset <= 255:
                    raise ValueError(f"jump of {offset} at instruction {at}")
                offsets.append(offset)
            out.append((code, offsets[0], offsets[1], k))
        return pack(out)


def self_filter(own_pid: int, *, arch: int, rules: tuple[tuple[int, SelfRule], ...]) -> bytes:
    """The per-child filter as packed ``sock_filter`` instructions: each ``(number, rule)``
    gets EPERM unless its arguments name the caller (``own_pid``) as the rule says; every
    other call, and any call from a foreign arch (which the base filter kills), is allowed.
    Each rule is a block of its own, entered when the number matches, so every jump is short
    whatever the number of rules; the number is loaded once (a block that does not match
    leaves it in the accumulator), so a call no rule names runs one comparison per rule."""
    if not 0 < own_pid <= 0x7FFFFFFF:
        raise ValueError(f"not a pid: {own_pid}")
    asm = Assembler()
    asm.emit(LD_W_ABS, ARCH_OFFSET)
    asm.emit(JEQ_K, arch, jf="allow")
    asm.emit(LD_W_ABS, NR_OFFSET)
    for i, (number, rule) in enumerate(rules):
        deny, after = f"deny{i}", f"next{i}"
        asm.emit(JEQ_K, number, jf=after)
        checks: list[tuple[int, tuple[int, ...]]] = []
        if rule.which is not None:
            checks.append((rule.which[0], (rule.which[1],)))
        pids = (own_pid, 0) if rule.zero_is_self else (own_pid,)
        checks.extend((arg, pids) for arg in rule.pid_args)
        for c, (arg, values) in enumerate(checks):
            ok = f"ok{i}.{c}"
            asm.emit(LD_W_ABS, arg_high(arg))
            asm.emit(JEQ_K, 0, jf=deny)
            asm.emit(LD_W_ABS, arg_low(arg))
            for v, value in enumerate(values):
                last = v == len(values) - 1
                asm.emit(JEQ_K, value, jt=ok, jf=deny if last else 0)
            asm.label(ok)
        asm.emit(RET_K, RET_ALLOW)
        asm.label(deny)
        asm.emit(RET_K, RET_ERRNO | errno.EPERM)
        asm.label(after)
    asm.label("allow")
    asm.emit(RET_K, RET_ALLOW)
    return asm.program()


def chain(first: bytes, then: bytes) -> bytes:
    """One program that runs ``first`` and, where ``first`` would allow the call, ``then``:
    each ``RET ALLOW`` of ``first`` becomes a jump to ``then``'s first instruction (a
    32-bit ``JA``, so ``first`` keeps its length and every offset in it holds). The kernel
    would run both filters and keep the most restrictive answer; this gives that answer as
    long as ``first`` refuses nothing ``then`` answers more strictly (a base filter's
    refusals are errnos, and the per-child filter's errno wins a tie as the filter loaded
    last did)."""
    out = []
    count = len(first) // 8
    for index in range(count):
        code, jt, jf, k = struct.unpack_from("=HBBI", first, index * 8)
        if code == RET_K and k == RET_ALLOW:
            code, jt, jf, k = JA, 0, 0, count - index - 1
        out.append((code, jt, jf, k))
    return pack(out) + then


def pid_offsets(template: bytes) -> tuple[int, ...]:
    """Where the pid constants sit in a :func:`self_filter` built for the placeholder."""
    found = []
    for at in range(0, len(template), 8):
        code, _, _, k = struct.unpack_from("=HBBI", template, at)
        if code == JEQ_K and k == PLACEHOLDER_PID:
            found.append(at + 4)
    if not found:
        raise ValueError("no pid in the per-child filter")
    return tuple(found)
