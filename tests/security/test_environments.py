"""The containment suite in every reference environment (DESIGN section 7, "Where hosts
run"), each simulated per process by ``tests.environments`` (as root, nothing machine-wide
changed): a program cannot open a socket to anything, read or write outside its allowed
paths, leave a process behind, signal any process but itself, hold more than 1.25x
``memory_mib``, write more than ``scratch_mib``, or run past its wall clock. The default
``Containment()`` runs with every dimension ``full`` (where no tmpfs can be mounted, the
keeper answers every write that could grow a scratch file), or fails closed naming what is
short and what the host can do (a container profile that refuses Landlock);
``probe()`` says exactly what runs report. The attacks run with ``require=()``, so they run
even where the default refuses; there, without a full filesystem, the keeper's scratch
quota acts after the writes (and says so).
"""

from __future__ import annotations

import functools
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.environments import ENVIRONMENTS, WITH_PTC_PROFILE, Harness, HostRun, tcp_listener

pytestmark = pytest.mark.slow

HOST = Path(__file__).with_name("_suite_host.py").read_text()
CANARY = "CANARY-18-c0ffee"
MIB = 1024
SHORT = {"wall_seconds": 10.0, "cpu_seconds": 5.0}

PROGRAMS = {
    "name other processes": textwrap.dedent(
        """\
        import ctypes, errno, os, platform, resource
        libc = ctypes.CDLL(None, use_errno=True)
        IOPRIO_SET = {"x86_64": 251, "aarch64": 30}[platform.machine()]

        def ioprio_idle(pid):
            if libc.syscall(IOPRIO_SET, 1, pid, (3 << 13) | 7) < 0:
                raise OSError(ctypes.get_errno(), "ioprio_set")

        out = {}
        targets = {"keeper": os.getppid(), "host": HOSTPID, "bystander": BYSTANDER}
        for who, pid in targets.items():
            if pid <= 0:
                continue
            calls = {
                "prlimit cpu": lambda: resource.prlimit(pid, resource.RLIMIT_CPU, (1, 1)),
                "prlimit nofile": lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, 3)),
                "read limits": lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE),
                "nice": lambda: os.setpriority(os.PRIO_PROCESS, pid, 19),
                "affinity": lambda: os.sched_setaffinity(pid, {0}),
                "idle": lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0)),
                "ioprio": lambda: ioprio_idle(pid),
            }
            for name, call in calls.items():
                try:
                    call()
                    out[f"{who} {name}"] = "done"
                except OSError as e:
                    out[f"{who} {name}"] = errno.errorcode.get(e.errno, str(e))
        return out
        """
    ),
    "datagrams to host sockets": textwrap.dedent(
        """\
        import errno, socket
        out = {}

        def attempt(name, call):
            try:
                call()
                out[name] = "sent"
            except OSError as e:
                out[name] = errno.errorcode.get(e.errno, str(e))

        def pair(kind):
            return socket.socketpair(socket.AF_UNIX, kind)[0]

        attempt("dgram pair by path", lambda: pair(socket.SOCK_DGRAM).sendto(b"p", "DGRAMPATH"))
        attempt("dgram pair by name", lambda: pair(socket.SOCK_DGRAM).sendto(b"n", "\\0ABSTRACT"))
        attempt("connect by path", lambda: pair(socket.SOCK_STREAM).connect("DGRAMPATH"))
        attempt("connect by name", lambda: pair(socket.SOCK_STREAM).connect("\\0ABSTRACT"))
        return out
        """
    ),
    "memory as stack": textwrap.dedent(
        """\
        import ctypes, errno, mmap
        out = {}
        try:
            m = mmap.mmap(-1, 512 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x0100)
            for i in range(0, len(m), 4096):
                m[i] = 1
            out["growsdown"] = "held"
        except OSError as e:
            out["growsdown"] = errno.errorcode.get(e.errno)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mremap.restype = ctypes.c_void_p
        libc.mremap.argtypes = [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p
        ]
        end = ctypes.c_void_p.in_dll(libc, "__libc_stack_end").value & ~4095
        errors = set()
        for k in range(512, 8, -1):  # from below: the first page that moves is unused
            new = libc.mremap(end - k * 4096, 4096, 512 << 20, 1, None)
            if new not in (None, 2**64 - 1):
                ctypes.memset(new, 1, 480 << 20)
                errors = {"held"}
                break
            errors.add(errno.errorcode.get(ctypes.get_errno()))
        out["mremap stack"] = sorted(errors)
        return out
        """
    ),
}
"""The longer attack programs of issue 27 (the red team's), as a model would write them."""

CASES: dict[str, dict[str, Any]] = {
    "tcp": {
        "code": (
            "import socket, errno\ntry:\n"
            "    socket.create_connection(('127.0.0.1', PORT), timeout=1)\n"
            "except OSError as e:\n    return errno.errorcode.get(e.errno, str(e))\n"
            "return 'connected'"
        ),
    },
    "udp": {
        "code": (
            "import socket, errno\ntry:\n"
            "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 53))\n"
            "except OSError as e:\n    return errno.errorcode.get(e.errno, str(e))\nreturn 'sent'"
        ),
    },
    "dns": {
        "code": (
            "import socket\ntry:\n    socket.getaddrinfo('example.com', 80)\n"
            "except OSError:\n    return 'no dns'\nreturn 'resolved'"
        ),
    },
    "read canary": {"code": "return open('CANARY').read()"},
    "read passwd": {"code": "return open('/etc/passwd').read()"},
    "write outside": {"code": "open('OUTSIDE', 'w').write('escaped')\nreturn 'wrote'"},
    "scratch is writable": {
        "code": "open('note', 'w').write('x')\nimport os\nreturn os.listdir('.')",
    },
    "lock its files in": {  # the host still removes the scratch dir (see the leftovers)
        "code": (
            "import os\nos.makedirs('a/b')\nopen('a/b/f', 'w').write('x')\n"
            "os.chmod('a/b', 0)\nos.chmod('a', 0)\nreturn 'locked'"
        ),
    },
    "leave a process": {
        "code": (
            "import os, time\ntry:\n    if os.fork() == 0:\n        os.setsid()\n"
            "        time.sleep(60)\nexcept OSError as e:\n    return e.errno\nreturn 'forked'"
        ),
    },
    "signal others": {
        "code": (
            "import os, errno\nout = {}\n"
            "for name, pid, sig in [('bystander', BYSTANDER, 9), ('group', 0, 0),"
            " ('everyone', -1, 0), ('itself', os.getpid(), 0)]:\n"
            "    try:\n        os.kill(pid, sig)\n        out[name] = 'sent'\n"
            "    except OSError as e:\n        out[name] = errno.errorcode[e.errno]\nreturn out"
        ),
    },
    # Issue 27, item 4: without a pid namespace every call that names a process was a way to
    # the keeper (its parent), the host and other runs; the host was killed through its
    # RLIMIT_CPU. Every target is a process the suite started: its host, its bystander, and
    # the program's own parent (0 inside a pid namespace, where it is out of sight).
    "name other processes": {"code": PROGRAMS["name other processes"]},
    # Item 7: a datagram from a socketpair reached a host daemon's socket by path (every
    # environment, E1 included) and by abstract name (where Landlock has no socket scope).
    "datagrams to host sockets": {"code": PROGRAMS["datagrams to host sockets"]},
    # Item 6: memory that RLIMIT_DATA counts as stack held 384-1,024 MiB with memory_mib=64
    # where no cgroup bounds it: a MAP_GROWSDOWN mapping, or a page of the stack moved by
    # mremap and grown.
    "memory as stack": {"code": PROGRAMS["memory as stack"], "limits": {"memory_mib": 64}},
    "memory bomb": {
        "code": "chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 20))",
        "limits": {"memory_mib": 128},
    },
    "scratch flood": {
        "strict": True,
        "code": (
            "import errno\nwritten = 0\ntry:\n    for i in range(40):\n"
            "        with open(f'f{i}', 'wb') as f:\n            for _ in range(4):\n"
            "                f.write(b'x' * (1 << 20))\n                f.flush()\n"
            "                written += 1\n"
            "except OSError as e:\n    return [written, errno.errorcode.get(e.errno)]\n"
            "return [written, None]"
        ),
        "limits": {"scratch_mib": 32, "memory_mib": 256},
    },
    "threads": {
        "strict": True,
        "code": (
            "import threading\nt = threading.Thread(target=lambda: None)\n"
            "try:\n    t.start()\nexcept RuntimeError as e:\n    return str(e)\n"
            "t.join()\nreturn 'started'"
        ),
    },
    "asyncio": {  # top-level await and asyncio.run, on the main thread under the write gate
        "strict": True,
        "code": (
            "import asyncio\nasync def one(i):\n    await asyncio.sleep(0)\n    return i\n"
            "return await asyncio.gather(one(1), one(2))"
        ),
    },
    "wall clock": {
        "code": "while True:\n    pass",
        "limits": {"wall_seconds": 1.0, "cpu_seconds": 30.0},
    },
}

NO_LANDLOCK = "E4-old"
"""Where a container profile refuses the Landlock system calls (Docker before 23)."""
SHORT_BY_DEFAULT = {NO_LANDLOCK: {"filesystem", "memory"}}
"""What the default refuses, by environment (everywhere else it runs, all full): without
Landlock, files (permissions only) and shared memory (``/dev/shm``)."""
TMPFS = {"E1", "E2", "E4+ptc", "E6+ptc"}
"""Where the scratch quota is a tmpfs (a mount namespace: root, or a user namespace, as the
seccomp rule of docs/deployment.md allows, but root without capabilities cannot be mapped
into one); elsewhere the keeper keeps it."""


@functools.cache
def _suite(envsim: Harness, env: str, abi_limit: int | None) -> tuple[HostRun, int]:
    with tcp_listener() as listener:
        cases = {
            name: {
                "code": case["code"].replace("PORT", str(listener.port)),
                "limits": {**SHORT, **case.get("limits", {})},
                "strict": case.get("strict", False),
            }
            for name, case in CASES.items()
        }
        run = envsim.run(
            env,
            HOST,
            inputs={"cases": cases, "abi_limit": abi_limit},
            files={"canary.txt": CANARY},
            timeout_s=240.0,
        )
        return run, listener.accepted()


def _case(run: HostRun, name: str) -> dict[str, Any]:
    assert run.output is not None
    case: dict[str, Any] = run.output["cases"][name]
    return case


# One run of the suite per environment and test process (``_suite`` is cached): each
# environment's tests go to one pytest-xdist worker (make test's --dist loadgroup).
@pytest.fixture(
    params=[
        pytest.param(env, marks=pytest.mark.xdist_group(f"security-environments-{env}"))
        for env in [*ENVIRONMENTS, *WITH_PTC_PROFILE]
    ]
)
def suite(request: pytest.FixtureRequest, envsim: Harness) -> tuple[str, HostRun, int]:
    env: str = request.param
    run, accepted = _suite(envsim, env, None)
    return env, run, accepted


def test_no_socket_reaches_anything(suite: tuple[str, HostRun, int]) -> None:
    env, run, accepted = suite
    assert accepted == 0
    assert _case(run, "tcp")["value"] in ("EPERM", "ENETUNREACH", "EACCES"), env
    assert _case(run, "udp")["value"] in ("EPERM", "ENETUNREACH", "EACCES"), env
    assert _case(run, "dns")["value"] == "no dns"


def test_nothing_outside_the_allowed_paths(suite: tuple[str, HostRun, int]) -> None:
    env, run, _ = suite
    assert _case(run, "scratch is writable")["value"] == ["note"]
    assert run.output is not None
    if env == NO_LANDLOCK:
        # File permissions are all there is: uid 65534 reads what others may read and
        # writes where others may write. The report says so; the default refuses to run.
        assert _case(run, "read canary")["value"] == CANARY
        assert run.output["outside_exists"]
        fs = _case(run, "read canary")["enforcement"]["filesystem"]
        assert fs["level"] == "partial" and "refused by seccomp (EPERM" in fs["gap"]
        return
    canary = _case(run, "read canary")
    assert canary["kind"] == "exception" and "PermissionError" in canary["detail"]
    assert CANARY not in json.dumps(run.output)
    assert not _case(run, "read passwd")["ok"]
    assert _case(run, "write outside")["kind"] == "exception"
    assert not run.output["outside_exists"]


def test_no_process_is_left_and_no_other_is_signalled(suite: tuple[str, HostRun, int]) -> None:
    env, run, _ = suite
    assert _case(run, "leave a process")["value"] == 1  # EPERM: fork is refused
    assert _case(run, "signal others")["value"] == {
        "bystander": "EPERM",
        "group": "EPERM",
        "everyone": "EPERM",
        "itself": "sent",
    }
    assert run.output is not None and run.output["bystander_alive"]
    escaped = ("ptc-escaped.txt",) if env == NO_LANDLOCK else ()  # see the test above
    assert run.survivors == () and run.leftovers == escaped, (run.survivors, run.leftovers)


def test_no_call_reaches_another_process(suite: tuple[str, HostRun, int]) -> None:
    env, run, _ = suite
    assert run.output is not None
    attempts = _case(run, "name other processes")["value"]
    # Inside a pid namespace the keeper is out of sight; elsewhere it is a target too.
    pid_namespace = "pid namespace" in _case(run, "tcp")["enforcement"]["processes"]["mechanism"]
    targets = {"host", "bystander"} | (set() if pid_namespace else {"keeper"})
    assert {name.split()[0] for name in attempts} == targets, attempts
    assert set(attempts.values()) == {"EPERM"}, (env, attempts)
    assert run.output["sched_after"] == run.output["sched_before"], env
    assert run.output["bystander_alive"]


def test_no_datagram_reaches_a_host_socket(suite: tuple[str, HostRun, int]) -> None:
    env, run, _ = suite
    assert run.output is not None
    attempts = _case(run, "datagrams to host sockets")["value"]
    assert attempts == dict.fromkeys(attempts, "EPERM") and len(attempts) == 4, (env, attempts)
    assert run.output["daemons_received"] == [], env
    assert _case(run, "datagrams to host sockets")["enforcement"]["network"]["level"] == "full"


def test_no_memory_is_held_as_stack(suite: tuple[str, HostRun, int]) -> None:
    env, run, _ = suite
    case = _case(run, "memory as stack")
    assert case["value"] == {"growsdown": "EPERM", "mremap stack": ["EPERM"]}, (env, case)
    peak = case["peak_memory_kib"]
    assert peak is None or peak <= 1.25 * 64 * MIB, (env, peak)


def test_memory_stays_within_a_quarter_over(suite: tuple[str, HostRun, int]) -> None:
    env, run, _ = suite
    bomb = _case(run, "memory bomb")
    assert bomb["kind"] == "memory-limit", bomb
    peak = bomb["peak_memory_kib"]
    assert peak is not None and 0 < peak <= 1.25 * 128 * MIB, (env, peak)


def test_the_scratch_quota_holds(suite: tuple[str, HostRun, int]) -> None:
    env, run, _ = suite
    assert run.output is not None
    if env not in SHORT_BY_DEFAULT:  # the default: a hard quota, a tmpfs or the keeper's gate
        flood = run.output["strict"]["scratch flood"]
        written, error = flood["value"]
        assert error == "ENOSPC" and 28 <= written <= 32, flood
        assert flood["enforcement"]["filesystem"]["level"] == "full"
    relaxed = _case(run, "scratch flood")  # require=(): no gate, so the keeper acts after
    written, error = relaxed["value"]
    if env in TMPFS:
        assert error == "ENOSPC" and written <= 32, relaxed
    else:
        # RLIMIT_FSIZE 0 once the keeper saw the files pass 32 MiB (it acts after them).
        assert error == "EFBIG" and 28 <= written <= 64, relaxed
        assert relaxed["enforcement"]["filesystem"]["level"] == "partial"


def test_the_keepers_write_gate_costs_the_program_its_threads(
    suite: tuple[str, HostRun, int],
) -> None:
    env, run, _ = suite
    assert run.output is not None
    assert _case(run, "threads")["value"] == "started"  # require=(): no gate
    if env in SHORT_BY_DEFAULT:
        return
    strict = run.output["strict"]["threads"]
    assert strict["value"] == ("started" if env in TMPFS else "can't start new thread"), strict


def test_async_programs_run_where_threads_may_not(suite: tuple[str, HostRun, int]) -> None:
    env, run, _ = suite
    assert run.output is not None
    assert _case(run, "asyncio")["value"] == [1, 2], env
    if env not in SHORT_BY_DEFAULT:
        assert run.output["strict"]["asyncio"]["value"] == [1, 2], env


def test_the_wall_clock_ends_a_busy_loop(suite: tuple[str, HostRun, int]) -> None:
    _, run, _ = suite
    assert _case(run, "wall clock")["kind"] == "timeout"


def test_the_default_runs_full_or_fails_closed_naming_the_gap(
    suite: tuple[str, HostRun, int],
) -> None:
    env, run, _ = suite
    assert run.output is not None
    default = run.output["default"]
    levels = {d: e["level"] for d, e in default["enforcement"].items()}
    if env not in SHORT_BY_DEFAULT:
        assert default["ok"] and set(levels.values()) == {"full"}, default
        return
    short = SHORT_BY_DEFAULT[env]
    assert default["kind"] == "sandbox-unavailable", default
    assert {d for d, level in levels.items() if level != "full"} == short
    for dimension in short:
        assert f"{dimension} is partial" in default["detail"]
    assert "docs/deployment.md" in default["detail"] and "--require" in default["detail"]


def test_probe_predicts_exactly_what_runs_report(suite: tuple[str, HostRun, int]) -> None:
    env, run, _ = suite
    assert run.output is not None
    first = _case(run, "tcp")["enforcement"]
    assert run.output["probe"] == first, env
    assert run.output["default_probe"] == run.output["default"]["enforcement"], env


@pytest.mark.parametrize("env", ["E3", "E4", "E6"])
def test_signals_stay_in_without_landlock_scoping(envsim: Harness, env: str) -> None:
    # Landlock ABI 5 (Linux 6.8: Ubuntu 24.04) has no signal scope, and these have no pid
    # namespace: the seccomp filter on the pid is what keeps the bystander alive.
    run, _ = _suite(envsim, env, 5)
    assert _case(run, "signal others")["value"]["bystander"] == "EPERM"
    assert run.output is not None and run.output["bystander_alive"]
    processes = _case(run, "signal others")["enforcement"]["processes"]
    assert processes["level"] == "full"
    assert "seccomp pid filter" in processes["mechanism"]
    assert "Landlock scope" not in processes["mechanism"]
    assert run.output["probe"] == _case(run, "tcp")["enforcement"]


def test_a_cgroup_delegated_to_a_user_is_used(envsim: Harness) -> None:
    # As systemd delegates a user's scope: the host's own cgroup v2 is the user's. Runs nest
    # under it (cgroup.kill), and say why there is still no memory cgroup (this machine's v2
    # hierarchy has no memory controller to hand down); nothing of them is left in it.
    run = envsim.run_code("E2", "return 1", delegate_cgroup=True)
    result = run.results[0]
    assert not result["is_error"], result
    enforcement = result["meta"]["enforcement"]
    assert "cgroup.kill" in enforcement["processes"]["mechanism"]
    assert "no memory or pids controller to hand down" in enforcement["memory"]["gap"]
    assert run.output is not None and run.output["probe"] == enforcement
    assert run.survivors == () and run.leftovers == ()
