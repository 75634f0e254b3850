"""The pool primes children for the runs in use, and never hands one child two runs or one
SDK's child to another SDK (real zygote, real contained children)."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.security._support import SDK, SHORT, echo_calls
from worker import Containment, Limits, RunRequest, SubprocessBackend
from worker._errors import StartFailed
from worker._host._pool import ChildPool
from worker._host._zygote_client import ZygoteClient
from worker._protocol._spawn_config import ChildRequest

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root]

# A program that marks the interpreter it runs in and says whether it found a mark: a
# reused child would see the previous run's mark.
MARK = (
    "import builtins\nseen = hasattr(builtins, 'ptc_test_mark')\n"
    "builtins.ptc_test_mark = True\nreturn seen"
)
OTHER_SDK = SDK.replace('echo = _Tool("echo")', 'other = _Tool("other")')


@pytest.fixture
async def backend() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend(Containment(pool_size=2)) as b:
        yield b


def request(code: str, sdk: str = SDK) -> RunRequest:
    return RunRequest(code=code, sdk_module=sdk, limits=SHORT)


async def test_pooled_children_are_primed_for_the_last_runs_sdk(
    backend: SubprocessBackend,
) -> None:
    await backend.run(request("return 1"), on_calls=echo_calls)
    await backend.start()  # finish the background refill and priming
    assert [c.sdk_module for c in backend.pooled] == [SDK, SDK]


async def test_a_preloaded_child_is_never_reused_across_runs(backend: SubprocessBackend) -> None:
    await backend.run(request("return 1"), on_calls=echo_calls)
    pids: set[int] = set()
    for _ in range(6):
        await backend.start()  # primed children wait in the pool
        pooled = {c.pid for c in backend.pooled}
        assert not pooled & pids, "a child that served a run is back in the pool"
        out = await backend.run(request(MARK), on_calls=echo_calls)
        assert out.ok and out.value is False, out  # a fresh interpreter every time
        assert out.enforcement and all(e.level == "full" for e in out.enforcement.values())
        pids |= pooled - {c.pid for c in backend.pooled}  # the one this run took
    assert len(pids) == 6


async def test_a_child_primed_for_one_sdk_never_serves_another(
    backend: SubprocessBackend,
) -> None:
    await backend.run(request("return 1"), on_calls=echo_calls)
    await backend.start()
    assert all(c.sdk_module == SDK for c in backend.pooled)
    code = "return [hasattr(tools, 'echo'), hasattr(tools, 'other')]"
    out = await backend.run(request(code, OTHER_SDK), on_calls=echo_calls)
    assert out.ok and out.value == [False, True], out
    # ... and the next run of the first SDK still gets the first SDK's tools.
    out = await backend.run(request(code), on_calls=echo_calls)
    assert out.ok and out.value == [True, False], out
    await backend.start()
    # The pool follows the SDKs in use (a child primed for another is retired, not used).
    assert all(c.sdk_module in (SDK, OTHER_SDK) for c in backend.pooled)


async def test_changed_limits_are_never_served_by_a_child_primed_for_others(
    backend: SubprocessBackend,
) -> None:
    await backend.run(request("return 1"), on_calls=echo_calls)
    await backend.start()
    tighter = RunRequest(
        code="import resource\nreturn resource.getrlimit(resource.RLIMIT_AS)[0] >> 20",
        sdk_module=SDK,
        limits=Limits(wall_seconds=3.0, cpu_seconds=1.0, memory_mib=128),
    )
    out = await backend.run(tighter, on_calls=echo_calls)
    assert out.ok and out.value == 128 + 1024, out  # RLIMIT_AS = memory + 1 GiB backstop


async def test_the_zygote_compiles_the_sdk_in_use_and_runs_stay_right_across_sdks(
    backend: SubprocessBackend,
) -> None:
    code = "return [hasattr(tools, 'echo'), hasattr(tools, 'other')]"
    for sdk, want in [(SDK, [True, False]), (OTHER_SDK, [False, True]), (SDK, [True, False])]:
        for _ in range(3):
            out = await backend.run(request(code, sdk), on_calls=echo_calls)
            assert out.ok and out.value == want, out
    # A module the zygote cannot compile is left to the child, which reports it.
    broken = SDK + "\ndef (:\n"
    out = await backend.run(request("return 1", broken), on_calls=echo_calls)
    assert out.kind == "exception" and "SDK module failed to load" in out.detail
    assert (await backend.run(request(code), on_calls=echo_calls)).value == [True, False]


async def test_a_lasting_start_failure_fails_runs_at_once_without_forking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A scratch dir the child cannot make: its setup fails the same way every time.
    from worker._host import _pool

    missing = _unmakeable_scratch(monkeypatch)
    asked = 0
    original = ZygoteClient.request

    def counted(self: ZygoteClient, cfg: ChildRequest, fds: list[int]) -> None:
        nonlocal asked
        asked += 1
        original(self, cfg, fds)

    monkeypatch.setattr(ZygoteClient, "request", counted)
    b = SubprocessBackend(Containment(namespaces=False, pool_size=2))
    try:  # no warm-up: the runs themselves meet the failure
        first = await b.run(request("return 1"), on_calls=echo_calls)
        forked = asked
        later = [await b.run(request("return 1"), on_calls=echo_calls) for _ in range(5)]
        await b.settle()
        assert asked == forked  # nothing more was forked for the runs that followed
        # After the retry interval one child is tried again (the host may have changed).
        monkeypatch.setattr(_pool, "LASTING_RETRY_S", 0.0)
        again = await b.run(request("return 1"), on_calls=echo_calls)
        assert asked > forked
    finally:
        await b.aclose()
    for out in (first, *later, again):
        assert out.kind == "sandbox-unavailable"
        assert out.detail.startswith(
            f"could not start a child: the child could not make its scratch dir {missing}"
        )
    assert forked <= 3  # the pool's two, and the run's own at most


def _unmakeable_scratch(monkeypatch: pytest.MonkeyPatch) -> str:
    """Children asked for from now on are given a scratch dir in a folder that is not there
    (they make their scratch dirs themselves where no tmpfs can be mounted)."""
    missing = os.path.join(tempfile.gettempdir(), "ptc-gone-for-this-test", "run")
    original = ChildPool._cfg

    def cfg(self: ChildPool, scratch: str, *args: Any) -> ChildRequest:
        return original(self, missing, *args)

    monkeypatch.setattr(ChildPool, "_cfg", cfg)
    return missing


async def test_start_fails_closed_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    _unmakeable_scratch(monkeypatch)
    backend = SubprocessBackend(Containment(namespaces=False, pool_size=2))
    with pytest.raises(StartFailed, match="make its scratch dir"):
        async with backend:
            pass
    assert backend.closed and backend.zygote_pid is None


async def test_a_host_out_of_file_descriptors_fails_runs_as_such(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Out of descriptors while the memory limit is written (the pool priming a child, or a
    # run applying its limits): the run fails worker-exit and says why, never that the
    # host lacks memory containment; once descriptors are back, runs work.
    from worker._host._cgroups import RunCgroups

    original = RunCgroups.set_memory_limit

    def out_of_fds(self: RunCgroups, limit_bytes: int) -> bool:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(RunCgroups, "set_memory_limit", out_of_fds)
    async with SubprocessBackend(Containment(pool_size=1)) as backend:
        for _ in range(2):  # the first takes an unprimed child, the second a primed one
            out = await backend.run(request("return 1"), on_calls=echo_calls)
            assert out.kind == "worker-exit", out
            assert "out of file descriptors" in out.detail
        monkeypatch.setattr(RunCgroups, "set_memory_limit", original)
        out = await backend.run(request("return 2"), on_calls=echo_calls)
        assert out.ok and out.value == 2, out
