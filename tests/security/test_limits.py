"""Every limit breached on purpose in a real contained child; the host survives all of it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from tests.security._support import RELAXED, SHORT, leftover_descendants, run
from worker import Containment, Limits
from worker._host._backend import SubprocessBackend

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root]


@pytest.fixture
async def backend() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend(Containment(pool_size=1)) as b:
        yield b


async def test_infinite_loop_hits_the_cpu_limit(backend: SubprocessBackend) -> None:
    # The wall clock is far off: on a loaded machine the loop gets its CPU second late.
    out = await run(backend, "while True: pass", Limits(wall_seconds=60, cpu_seconds=1))
    # cpu-limit is the keeper's finding that the kernel's CPU clock passed the limit; the
    # rusage reported beside it counts differently, lower on a loaded host (no bound here).
    assert out.kind == "cpu-limit"
    assert out.stats.cpu_ms > 0


async def test_infinite_loop_hits_the_wall_clock_first_when_cpu_is_generous(
    backend: SubprocessBackend,
) -> None:
    out = await run(backend, "while True: pass", Limits(wall_seconds=1, cpu_seconds=10))
    assert out.kind == "timeout"


async def test_sleep_hits_the_wall_clock_and_keeps_what_was_printed(
    backend: SubprocessBackend,
) -> None:
    code = "import time\nprint('before the nap', flush=True)\ntime.sleep(30)"
    out = await run(backend, code, Limits(wall_seconds=1))
    assert out.kind == "timeout"
    assert "before the nap" in out.output.text


async def test_allocation_bomb_is_a_memory_limit(backend: SubprocessBackend) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))"
    out = await run(backend, code, Limits(wall_seconds=10, memory_mib=128))
    assert out.kind == "memory-limit"


async def test_one_huge_allocation_is_a_memory_limit(backend: SubprocessBackend) -> None:
    out = await run(backend, "x = bytearray(4 << 30)", Limits(wall_seconds=5, memory_mib=128))
    assert out.kind == "memory-limit"


async def test_fork_bomb_is_refused(backend: SubprocessBackend) -> None:
    code = "import os\nwhile True:\n    os.fork()"
    out = await run(backend, code)
    assert out.kind == "exception"
    assert "PermissionError" in out.detail


async def test_fork_bomb_without_seccomp_stops_at_pids_max() -> None:
    containment = Containment(seccomp=False, require=frozenset(), pool_size=0)
    async with SubprocessBackend(containment) as b:
        code = (
            "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
            "            time.sleep(60)\n        n += 1\n"
            "except OSError as e:\n    return [n, e.errno]"
        )
        out = await run(b, code)
        assert out.ok, out.detail
        forked, err = out.value
        assert forked < 64 and err == 11  # EAGAIN from pids.max
        assert leftover_descendants(b.zygote_pid or 0) == []


@pytest.mark.parametrize(
    "containment",
    [
        pytest.param(Containment(seccomp=False, cgroups=False), id="pid-namespace"),
        pytest.param(Containment(seccomp=False, namespaces=False), id="cgroup.kill"),
        pytest.param(
            Containment(seccomp=False, namespaces=False, cgroups=False), id="subreaper-sweep"
        ),
    ],
)
async def test_setsid_double_fork_does_not_survive(containment: Containment) -> None:
    import dataclasses

    containment = dataclasses.replace(containment, require=frozenset(), pool_size=0)
    code = (
        "import os, time\n"
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.write(w, b'x')\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "os.read(r, 1)\n"  # the escapee exists
        "return 'parent done'"
    )
    async with SubprocessBackend(containment) as b:
        out = await run(b, code)
        assert out.ok and out.value == "parent done"
        assert leftover_descendants(b.zygote_pid or 0) == []
        # a timed-out run with an escapee is cleaned up the same way
        out = await run(
            b, code.replace("return 'parent done'", "time.sleep(60)"), Limits(wall_seconds=1)
        )
        assert out.kind == "timeout"
        assert leftover_descendants(b.zygote_pid or 0) == []


async def test_stdout_flood_is_an_output_limit(backend: SubprocessBackend) -> None:
    limits = Limits(wall_seconds=5, output_bytes=1000, stream_bytes=1 << 20)
    out = await run(backend, "while True:\n    print('x' * 999)", limits)
    assert out.kind == "output-limit"
    assert out.output.truncated and out.output.total_bytes > 1000
    assert out.output.text.startswith("xxx")


async def test_giant_result_is_an_invalid_result(backend: SubprocessBackend) -> None:
    out = await run(backend, "return 'x' * (2 << 20)", Limits(result_bytes=1 << 20))
    assert out.kind == "invalid-result"


async def test_fd_exhaustion_is_an_exception_and_the_run_ends(backend: SubprocessBackend) -> None:
    code = "fs = []\nwhile True:\n    fs.append(open('/dev/null'))"
    out = await run(backend, code)
    assert out.kind == "exception"
    assert "Too many open files" in out.detail


async def test_file_size_bomb_stops_at_rlimit_fsize_and_scratch_is_removed(
    backend: SubprocessBackend,
) -> None:
    code = (
        "import os\nprint(os.getcwd())\nwith open('big', 'wb') as f:\n    while True:\n"
        "        f.write(b'x' * (1 << 20))"
    )
    out = await run(backend, code)
    assert out.kind == "exception"
    assert "File too large" in out.detail
    scratch = out.output.text.strip()
    # A tmpfs on the backend's mount point (in the child's own mount namespace: the host's
    # view of the mount point stays empty), or a scratch dir of the child's own.
    name = os.path.basename(scratch)
    assert name == "scratch" or name.startswith("run-"), scratch
    await backend.settle()  # a run that ended with done is torn down in the background
    assert not os.path.exists(os.path.join(scratch, "big"))  # noqa: ASYNC240 - a test assertion


async def test_deep_recursion_is_an_exception(backend: SubprocessBackend) -> None:
    out = await run(backend, "def f(n):\n    return f(n + 1)\nf(0)")
    assert out.kind == "exception"
    assert "RecursionError" in out.detail
    assert len(out.detail) <= 20_000


async def test_c_stack_overflow_kills_only_the_child(backend: SubprocessBackend) -> None:
    code = "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1)\nf(0)"
    out = await run(backend, code, Limits(wall_seconds=10, memory_mib=512))
    assert out.kind in ("worker-exit", "memory-limit", "exception")
    assert (await run(backend, "return 'still here'")).value == "still here"


async def test_call_flood_is_a_call_limit(backend: SubprocessBackend) -> None:
    out = await run(backend, "while True:\n    tools.echo(x=1)", Limits(max_calls=5))
    assert out.kind == "call-limit"
    assert out.stats.calls == 5


async def test_relaxed_requirements_still_run(backend: SubprocessBackend) -> None:
    async with SubprocessBackend(RELAXED) as b:
        assert (await run(b, "return 2", SHORT)).value == 2
