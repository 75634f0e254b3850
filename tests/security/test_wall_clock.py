"""The wall clock bounds ``run_code`` itself, from its entry: host-side work (pre-flight)
counts, and a nested tool that ignores cancellation is abandoned at the deadline (and
logged), never awaited past it. Real contained children."""

from __future__ import annotations

import logging
import time

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest

import ptc

pytestmark = pytest.mark.anyio

GUARD_S = 30.0  # a deadlock guard only: every run here ends long before it


async def test_a_tool_that_shields_itself_is_abandoned_at_the_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = anyio.Event()
    finished = anyio.Event()

    async with ptc.ToolRuntime(default_mode="code", limits=ptc.Limits(wall_seconds=1)) as rt:

        @rt.tool
        async def stubborn() -> int:
            """Ignores cancellation until the test releases it."""
            with anyio.CancelScope(shield=True):
                await release.wait()
            finished.set()
            return 1

        await rt.root.prepare()
        entered = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="ptc"), anyio.fail_after(GUARD_S):
            result = await rt.root.run_code("return tools.stubborn()")
        elapsed_ms = (time.monotonic() - entered) * 1000
        # It returned while the tool was still blocked: the tool was not awaited.
        assert not finished.is_set()
        assert result.error is not None
        assert result.error.message.startswith("code run failed (timeout): "), result.error
        stats = result.meta["stats"]
        assert isinstance(stats, dict)
        wall_ms = stats["wall_ms"]
        assert isinstance(wall_ms, float)
        assert 1000 <= wall_ms <= elapsed_ms  # honest: the whole run, measured from entry
        assert any("abandoned" in r.getMessage() for r in caplog.records), caplog.records
        release.set()
        with anyio.fail_after(GUARD_S):
            await finished.wait()


async def test_at_the_deadline_a_nested_tool_sees_its_signal_when_cancelled() -> None:
    seen: list[bool] = []
    stopped = anyio.Event()

    # 3 s and a warm pool: on a busy machine a cold start alone took the whole second, and
    # the program never reached the tool.
    async with ptc.ToolRuntime(default_mode="code", limits=ptc.Limits(wall_seconds=3)) as rt:

        @rt.tool
        async def patient(context: ptc.ToolContext) -> int:
            """Sleeps until cancelled."""
            try:
                await anyio.sleep_forever()
            finally:
                seen.append(context.signal.cancelled)
                stopped.set()
            return 1

        await rt.root.prepare()
        assert not (await rt.root.run_code("return 1")).is_error  # the pool warm
        with anyio.fail_after(GUARD_S):
            result = await rt.root.run_code("return tools.patient()")
            await stopped.wait()
    assert result.error is not None and "(timeout)" in result.error.message
    assert seen == [True]


async def test_a_slow_pre_flight_ends_the_run_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ptc._code._preflight

    original = ptc._code._preflight.check_program
    release = anyio.Event()
    token = anyio.lowlevel.current_token()
    checked: list[bool] = []

    def slow_check(*args: object) -> object:
        # Host-side work that outlasts the wall clock (the event loop stays free).
        anyio.from_thread.run(release.wait, token=token)
        checked.append(True)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr("ptc._code._codemode.check_program", slow_check)
    async with ptc.ToolRuntime(default_mode="code", limits=ptc.Limits(wall_seconds=0.5)) as rt:
        await rt.root.prepare()
        # Long enough to be pre-flighted on a thread (short programs are checked inline).
        program = "# " + "x" * 400 + "\nreturn 1"
        with anyio.fail_after(GUARD_S):
            result = await rt.root.run_code(program)
        assert checked == []  # returned while the pre-flight was still running
        release.set()
    assert result.error is not None
    assert result.error.message.startswith(
        "code run failed (timeout): wall clock limit of 0.5 s exceeded during pre-flight"
    ), result.error


@pytest.mark.parametrize("profile", ["python", "restricted"])
async def test_a_long_program_ends_as_a_timeout(profile: ptc.Profile) -> None:
    # Just under the program size limit: parsing and compiling it on the host (and again
    # in the child) takes tens of milliseconds at the very least, on any machine, never
    # within a wall clock of 1 ms. (That pre-flight counts is shown causally above.)
    code = "x = 1\n" * 43_000 + "return x"
    limits = ptc.Limits(wall_seconds=0.001)
    async with ptc.ToolRuntime(default_mode="code", profile=profile, limits=limits) as rt:
        await rt.root.prepare()
        with anyio.fail_after(GUARD_S):
            result = await rt.root.run_code(code)
    assert result.error is not None
    assert result.error.message.startswith(
        "code run failed (timeout): wall clock limit of 0.001 s"
    ), result.error
