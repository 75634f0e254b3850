"""Bad input through the host API: oversized and degenerate programs, absurd limits, lone
surrogates, huge integers, fd exhaustion. Each gets a clear error of the documented codes
and kinds (never an internal exception's text) and leaves no scratch dir, cgroup or
process behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import ptc
from tests.security._support import cgroup_dirs, descendants, leftover_descendants, scratch_dirs
from worker import MAX_PROGRAM_BYTES, Containment, Limits

ROOT = Path(__file__).resolve().parents[2]


# --- values the host cannot apply are refused when they are built ---------------------


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"cpu_seconds": 1e30}, "cpu_seconds must be above 0 and at most 86400 s"),
        ({"wall_seconds": float("inf")}, "wall_seconds must be above 0 and at most 86400 s"),
        ({"wall_seconds": float("nan")}, "wall_seconds must be above 0"),
        ({"cpu_seconds": 0}, "cpu_seconds must be above 0"),
        ({"memory_mib": 10**15}, "memory_mib must be between 32 and 1048576"),
        ({"memory_mib": 1}, "memory_mib must be between 32 and 1048576"),
        ({"memory_mib": 512.0}, "memory_mib must be an int"),
        ({"scratch_mib": 0}, "scratch_mib must be between 1 and 1048576"),
        ({"result_bytes": 64 << 20}, "result_bytes must be between 1 and 8388608"),
        ({"max_calls": True}, "max_calls must be an int"),
        ({"max_parallel_calls": 10**6}, "max_parallel_calls must be between 1 and 1000"),
    ],
)
def test_limits_the_host_cannot_apply_are_a_value_error(
    kwargs: dict[str, object], needle: str
) -> None:
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        Limits(**kwargs)  # type: ignore[arg-type]


def test_the_smallest_and_largest_limits_are_accepted() -> None:
    Limits(memory_mib=32, scratch_mib=1, wall_seconds=86_400, cpu_seconds=0.01)
    Limits(memory_mib=1 << 20, result_bytes=8 << 20)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"pool_size": 2.5}, "pool_size must be an int from 0 to 64"),
        ({"pool_size": True}, "pool_size must be an int from 0 to 64"),
        ({"pool_size": 1000}, "pool_size must be an int from 0 to 64"),
        ({"pool_size": -1}, "pool_size must be an int from 0 to 64"),
        ({"seccomp": "no"}, "seccomp must be a bool"),
        ({"require": "memory"}, "not a str"),
        ({"require": ["disk"]}, "unknown dimensions"),
    ],
)
def test_bad_containment_is_a_value_error(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        Containment(**kwargs)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_the_smallest_memory_limit_runs_a_program() -> None:
    async with ptc.ToolRuntime(default_mode="code", limits=Limits(memory_mib=32)) as rt:
        result = await rt.root.run_code("return sum(range(1000))")
    assert result.error is None, result.error
    assert result.value == {"result": 499500, "stdout": ""}


# --- degenerate programs and values through run_code ------------------------------------


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Scratch dirs go to a temp root of this test, so other processes' do not count."""
    os.chmod(tmp_path, 0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield tmp_path


BIG_PROGRAM = "x = 1\n" + "#" * 20_000_000 + "\nreturn x"
DEEP_SUM = "return " + "+".join(["1"] * 100_000)


@pytest.mark.parametrize(
    ("code", "profile", "kind", "needle"),
    [
        (BIG_PROGRAM, "python", "preflight", f"over the limit of {MAX_PROGRAM_BYTES} bytes"),
        (BIG_PROGRAM, "restricted", "preflight", "over the limit"),
        (DEEP_SUM, "python", "syntax", "nests too deeply"),
        (DEEP_SUM, "restricted", "syntax", "nests too deeply"),
        ("return " + "+".join(["1"] * 600), "restricted", "syntax", "nests too deeply"),
        ("x = 'a\ud800'\nreturn x", "python", "syntax", "lone surrogate (U+D800) at line 1"),
        ("return 10**5000", "python", "invalid-result", "more digits than Python writes"),
        ("return {'n': [10**5000]}", "restricted", "invalid-result", "value['n'][0]"),
    ],
)
@pytest.mark.anyio
async def test_bad_programs_fail_clearly_and_leave_nothing(
    private_tmp: Path, code: str, profile: str, kind: str, needle: str
) -> None:
    before = set(descendants(os.getpid()))
    async with ptc.ToolRuntime(default_mode="code", profile=profile) as runtime:  # type: ignore[arg-type]
        result = await runtime.root.run_code(code)
    assert result.error is not None, result.value
    assert result.error.code == "CODE_RUN_FAILED", result.error
    assert result.error.message.startswith(f"code run failed ({kind}): "), result.error.message
    assert needle in result.error.message
    assert "Traceback" not in result.error.message
    _assert_nothing_left(before)


@pytest.mark.anyio
async def test_a_result_too_large_for_a_frame_is_an_invalid_result(private_tmp: Path) -> None:
    before = set(descendants(os.getpid()))
    # 6 MB of UTF-8 fits result_bytes, but 18 MB with each character escaped as \uXXXX:
    # over the frame cap.
    limits = Limits(result_bytes=8 << 20, memory_mib=512)
    async with ptc.ToolRuntime(default_mode="code", limits=limits) as runtime:
        result = await runtime.root.run_code("return '\\xe9' * 3_000_000")
    assert result.error is not None
    assert result.error.message.startswith("code run failed (invalid-result): "), result.error
    assert "frame cap" in result.error.message
    _assert_nothing_left(before)


@pytest.mark.anyio
async def test_a_lone_surrogate_in_a_result_reaches_the_host_replaced(private_tmp: Path) -> None:
    async with ptc.ToolRuntime(default_mode="code") as runtime:
        result = await runtime.root.run_code(
            "import logging\nprint('out \\ud800')\nlogging.warning('log \\udc00')\n"
            "return ['a\\ud800b', {'\\udfff': 'c'}]"
        )
    assert result.error is None, result.error
    assert result.value == {"result": ["a\ufffdb", {"\ufffd": "c"}], "stdout": "out \ufffd\n"}
    text = json.dumps([dict(block) for block in result.content], ensure_ascii=False)
    text.encode("utf-8")


def _assert_nothing_left(before: set[int]) -> None:
    assert scratch_dirs() == set()
    assert cgroup_dirs() == set()
    assert set(leftover_descendants(os.getpid())) <= before


# --- running out of file descriptors ------------------------------------------------------

FD_HOST = textwrap.dedent(
    """
    import json, os, resource, sys, tempfile
    import anyio, ptc

    tempfile.tempdir = sys.argv[1]

    async def main():
        out = {}
        async with ptc.ToolRuntime(
            default_mode="code", containment=ptc.Containment(pool_size=0)
        ) as rt:
            first = await rt.root.run_code("return 1")
            out["first"] = first.value
            # The first run's own scratch dir may still be there: a run that ended with done
            # is torn down in the background. The failed runs must add none.
            out["scratch_before_failures"] = sorted(os.listdir(sys.argv[1]))
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
            resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 8, hard))
            fillers = []
            try:  # take every descriptor still free, holes included
                while True:
                    fillers.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                pass
            failures = []
            for _ in range(3):
                r = await rt.root.run_code("return 2")
                failures.append([r.error.code, r.error.message] if r.error else None)
            out["failures"] = failures
            for fd in fillers:
                os.close(fd)
            out["scratch_after_failures"] = sorted(os.listdir(sys.argv[1]))
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            again = await rt.root.run_code("return 3")
            out["again"] = again.value
        out["pid"] = os.getpid()
        print(json.dumps(out))

    anyio.run(main)
    """
)


def test_fd_exhaustion_fails_runs_clearly_and_leaks_nothing(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    proc = subprocess.run(
        [sys.executable, "-c", FD_HOST, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["first"] == {"result": 1, "stdout": ""}
    for failure in out["failures"]:
        assert failure is not None
        code, message = failure
        assert code == "CODE_RUN_FAILED"
        assert message.startswith("code run failed (worker-exit): "), message
        assert "out of file descriptors" in message
    assert set(out["scratch_after_failures"]) <= set(out["scratch_before_failures"])
    assert out["again"] == {"result": 3, "stdout": ""}
    assert os.listdir(tmp_path) == []
    assert cgroup_dirs(prefix=f"ptc-{out['pid']}-") == set()
