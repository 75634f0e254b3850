"""The child, from the zygote's fork to the program: it dies with the zygote
(``PR_SET_PDEATHSIG``: nothing outlives its supervisor), keeps only its own fds, takes its
session, cgroups, scratch and uid (``_isolate``), then gives up what could reach outside:
rlimits (core, fsize, nofile, stack), an empty environment, the scratch dir as cwd,
no_new_privs, Landlock, no capabilities, seccomp (with the filter for its own pid), and,
where the scratch keeper holds its quota, registers with it (``_gatekeeper``). Then the
enforcement report of what held, and ``worker._child.serve``. A step that fails is written
on the child's supervisor line (``SetupFailed``) before the child exits, and the host names
it.

A namespace init ignores signals it has no handler for, so the child installs a SIGXCPU
handler that exits with :data:`EXIT_CPU_LIMIT`; a program that blocks or ignores SIGXCPU
(python profile) meets the hard limit's SIGKILL instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
from types import FrameType
from typing import Any, NoReturn

from .._kernel import _capabilities, _enforcement, _landlock, _seccomp
from .._kernel._syscalls import PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, prctl
from .._protocol._keeper_lines import Hello
from .._protocol._spawn_config import ChildConfig
from ._isolate import SetupError, isolate, step

NOFILE = 64
FSIZE_BYTES = 64 * 1024 * 1024
STACK_BYTES = 8 * 1024 * 1024
"""The main thread's stack at most (the usual default): a stack is memory RLIMIT_DATA does not
count, so a host that runs with ``ulimit -s unlimited`` must not lend that to a program."""
EXIT_CPU_LIMIT = 128 + signal.SIGXCPU
"""Exit status of a child whose SIGXCPU handler ran (the soft CPU limit was reached)."""


def child_main(
    cfg: ChildConfig, run_fd: int, line_fd: int, registrations: int, parent: int
) -> NoReturn:
    """Entry of the child process (in the zygote's fork): contain, report, serve. Never
    returns. ``line_fd``: its supervisor line, closed before the program runs;
    ``registrations``: the scratch keeper's socket (-1: none); ``parent``: the zygote as
    this process sees it (0 from inside a pid namespace)."""
    try:
        # Whatever kills the zygote (the host gone, an OOM kill, a bug) kills the child too.
        step("die with the zygote", lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL))
        if parent and os.getppid() != parent:
            raise SetupError("follow the zygote", OSError("the zygote died first"))
        # Its pid as the host sees it (/proc is the host's: inside a pid namespace of its own
        # the child is 1 to itself).
        me = int(os.readlink("/proc/self"))
        hello = Hello(keeper_pid=cfg["zygote_pid"], child_pid=me)
        step("say hello", lambda: os.write(line_fd, hello.to_line()))
        keep = (run_fd, line_fd, registrations, cfg["ruleset_fd"], cfg["zygote_pidfd"])
        step("close every other fd", lambda: _isolate_fds(tuple(fd for fd in keep if fd >= 0)))
        facts, scratch = isolate(cfg)
        _confine(cfg, facts, scratch)
        _follow_the_zygote(cfg["zygote_pidfd"])
        if facts["scratch_keeper"]:
            _register(cfg, facts, scratch, line_fd, registrations)
        elif registrations >= 0:
            os.close(registrations)
        enforcement = _enforcement.report(_enforcement.Facts(**facts))
        if cfg["rlimits"]:
            signal.signal(signal.SIGXCPU, _exit_at_cpu_limit)
        os.close(line_fd)
        line_fd = -1
        from .._child import serve

        serve(socket.socket(fileno=run_fd), enforcement, rlimits=bool(cfg["rlimits"]))
    except SetupError as exc:
        if line_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(line_fd, exc.line.to_line())
    except BaseException as exc:  # noqa: BLE001 - said on the line, as a step of its own
        if line_fd >= 0:
            failure = SetupError("set itself up", OSError(f"{type(exc).__name__}: {exc}"))
            with contextlib.suppress(OSError):
                os.write(line_fd, failure.line.to_line())
    finally:
        os._exit(71)


def _follow_the_zygote(zygote: int) -> None:
    """Ask again to die with the zygote: a change of uid or capabilities forgets the death
    signal. Then make sure it did not die in between (its pidfd turns readable)."""
    step("die with the zygote", lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL))
    gone, _, _ = select.select([zygote], [], [], 0)
    os.close(zygote)
    if gone:
        raise SetupError("follow the zygote", OSError("the zygote died"))


def _confine(cfg: ChildConfig, facts: dict[str, Any], scratch: str) -> None:
    if cfg["rlimits"]:
        fsize = FSIZE_BYTES
        if facts["scratch_keeper"]:  # no file may pass the quota alone
            fsize = min(fsize, cfg["scratch_mib"] * 1024 * 1024)

        def rlimits() -> None:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
            resource.setrlimit(resource.RLIMIT_STACK, _bounded(resource.RLIMIT_STACK, STACK_BYTES))

        step("set its rlimits (core, fsize, nofile, stack)", rlimits)
    os.environ.clear()
    step(f"enter the scratch dir {scratch}", lambda: os.chdir(scratch))
    step("set no_new_privs", lambda: prctl(PR_SET_NO_NEW_PRIVS, 1))
    _landlock_step(cfg, facts, scratch)
    step("drop its capabilities", _capabilities.drop_all)
    if facts["scratch_keeper"] and facts.get("landlock_abi"):
        # The scratch keeper reads its open files (/proc/<pid>/fd), which needs it dumpable
        # after a uid change; Landlock keeps /proc from other children.
        step("make itself readable by its keeper", lambda: prctl(PR_SET_DUMPABLE, 1))
    _seccomp_step(cfg, facts)


def _landlock_step(cfg: ChildConfig, facts: dict[str, Any], scratch: str) -> None:
    """Landlock, with the zygote's ruleset where every child's scratch is the same mount
    point, else with one of its own."""
    ruleset = cfg["ruleset_fd"]
    abi = cfg["landlock_abi"]
    if not abi:
        facts["landlock_error"] = cfg["landlock_error"] or "Landlock off"
        return
    try:
        if ruleset >= 0:
            res = _landlock.restrict_with(ruleset, abi)
            os.close(ruleset)
        else:
            res = _landlock.restrict(
                read_only=cfg["read_only"], read_write=[scratch, "/dev/null"], abi=abi
            )
        facts["landlock_abi"] = res.abi
    except OSError as exc:
        facts["landlock_error"] = str(exc)


def _register(
    cfg: ChildConfig, facts: dict[str, Any], scratch: str, line_fd: int, registrations: int
) -> None:
    """Hand the scratch keeper this child's scratch dir, quota and line, and the listener of
    its write gate where the run requires a full filesystem (then every call that could
    grow a file waits for the keeper's yes). Without seccomp, Landlock or the kernel's
    support for the gate, the keeper's quota acts after the writes (and the report says so)."""
    listener = -1
    if cfg["scratch_gate"]:
        if not facts.get("seccomp"):
            facts["scratch_gate_error"] = "no seccomp"
        elif not facts.get("landlock_abi"):
            # The keeper reads this child's /proc to decide, which needs it dumpable, which
            # is safe only while Landlock keeps other programs from that /proc.
            facts["scratch_gate_error"] = "no Landlock"
        else:
            try:
                listener = _seccomp.install_write_gate()
            except OSError as exc:
                facts["scratch_gate_error"] = f"the write gate could not be loaded: {exc}"
    if registrations < 0:
        raise SetupError("register with the scratch keeper", OSError("no scratch keeper"))
    message = json.dumps({"scratch": scratch, "quota_mib": cfg["scratch_mib"]}).encode()
    fds = [line_fd] if listener < 0 else [line_fd, listener]
    try:
        with socket.socket(fileno=registrations) as keeper:
            step(
                "register with the scratch keeper", lambda: socket.send_fds(keeper, [message], fds)
            )
    finally:
        if listener >= 0:
            os.close(listener)
    facts["scratch_gate"] = listener >= 0


def _seccomp_step(cfg: ChildConfig, facts: dict[str, Any]) -> None:
    if not cfg["seccomp"]:
        facts["seccomp_error"] = "seccomp off"
        return
    try:
        _seccomp.install()
        facts["seccomp"] = True
    except (OSError, RuntimeError) as exc:
        facts["seccomp_error"] = str(exc)


def _bounded(kind: int, most: int) -> tuple[int, int]:
    """This process's limit of ``kind`` lowered to ``most`` (never raised)."""
    soft, hard = resource.getrlimit(kind)
    hard = most if hard == resource.RLIM_INFINITY else min(hard, most)
    soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
    return soft, hard


def _exit_at_cpu_limit(signum: int, frame: FrameType | None) -> NoReturn:
    # Runs between bytecodes of the main thread; a program stuck in one long C call
    # meets the hard limit's SIGKILL a CPU second later instead (same report).
    os._exit(EXIT_CPU_LIMIT)


def _isolate_fds(keep: tuple[int, ...]) -> None:
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        os.set_inheritable(fd, False)
        low = fd + 1
    os.closerange(low, 1 << 16)
