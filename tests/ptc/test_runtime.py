"""ToolRuntime: construction checks, lifetime, code-mode hooks and async change listeners."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import ptc

from .helpers import echo_tool


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"default_mode": "sideways"}, ValueError),
        ({"max_parallel_calls": 0}, ValueError),
        ({"max_parallel_calls": True}, TypeError),
        ({"profile": "ruby"}, ValueError),
        ({"limits": {"wall_seconds": 1}}, TypeError),
    ],
)
def test_invalid_runtime_options_raise(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        ptc.ToolRuntime(**options)


def test_defaults_come_from_worker_types() -> None:
    runtime = ptc.ToolRuntime()
    assert runtime.limits == ptc.Limits() and runtime.containment == ptc.Containment()
    assert runtime.root.code_options() == ("native", "python", ptc.Limits())


def test_default_mode_code_applies_where_no_scope_declared() -> None:
    runtime = ptc.ToolRuntime(default_mode="code")
    runtime.register(echo_tool("echo"))
    assert [t["name"] for t in runtime.scope("a").model_tools()] == ["run_code"]


@pytest.mark.anyio
async def test_aclose_closes_code_mode_once_and_awaits_async_change_listeners() -> None:
    seen: list[ptc.Scope] = []

    async def on_change(scope: ptc.Scope) -> None:
        await anyio.lowlevel.checkpoint()
        seen.append(scope)

    async with ptc.ToolRuntime() as runtime:
        runtime.on("tools/change", on_change)
        runtime.register(echo_tool("echo"))
        code_mode: Any = runtime._code_mode
    assert code_mode.closed and seen == [runtime.root]
    await runtime.close()


def test_unknown_events_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown event"):
        ptc.ToolRuntime().on("tools/nope", lambda p: None)  # type: ignore[call-overload]


# -- lifetime: close hooks and background tasks ----------------------------------------------


@pytest.mark.anyio
async def test_close_hooks_run_last_first_after_code_mode_and_survive_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    order: list[str] = []

    async def second() -> None:
        order.append(f"second, code mode closed: {runtime.scope('x').lifetime.closed}")

    def broken() -> None:
        raise RuntimeError("hook failed")

    async with ptc.ToolRuntime() as runtime:
        runtime.on_close(lambda: order.append("first"))
        runtime.on_close(broken)
        runtime.lifetime.on_close(second)
        dispose = runtime.on_close(lambda: order.append("never"))
        dispose()
    assert order == ["second, code mode closed: True", "first"]
    assert "hook failed" in caplog.text
    with pytest.raises(ptc.ClosedError):
        runtime.on_close(lambda: None)


@pytest.mark.anyio
async def test_background_tasks_need_an_entered_runtime_and_never_take_it_down() -> None:
    runtime = ptc.ToolRuntime()

    async def task(*, task_status: Any) -> None:
        task_status.started("ready")
        raise RuntimeError("after start: logged, not raised")

    with pytest.raises(ptc.ClosedError, match="async with"):
        await runtime.lifetime.start(task)
    async with runtime:
        assert await runtime.lifetime.start(task) == "ready"

        async def early(*, task_status: Any) -> None:
            raise ValueError("before start: raised to the caller")

        with pytest.raises(ValueError, match="before start"):
            await runtime.lifetime.start(early)
        assert runtime.root.lifetime is runtime.lifetime
    assert runtime.closed


# --- cancellation and closing in every nesting order ----------------


@pytest.mark.anyio
async def test_a_cancelled_caller_sets_the_nested_tools_signal_before_cancelling_it() -> None:
    from worker.testing import FakeBackend

    seen: list[bool] = []
    entered = anyio.Event()
    async with ptc.ToolRuntime(default_mode="code", backend=FakeBackend()) as runtime:

        @runtime.tool
        async def slow(context: ptc.ToolContext) -> int:
            """Sleeps until cancelled."""
            entered.set()
            try:
                await anyio.sleep(30)
            finally:
                seen.append(context.signal.cancelled)
            return 1

        await runtime.root.prepare()
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await runtime.root.run_code("return tools.slow()")

                tg.start_soon(call)
                await entered.wait()
                tg.cancel_scope.cancel()  # the calling task, not the signal
    assert seen == [True]


async def _change_listener_pending(runtime: ptc.ToolRuntime, done: anyio.Event) -> None:
    async def listener(scope: ptc.Scope) -> None:
        await anyio.sleep(0.01)
        done.set()

    runtime.on("tools/change", listener)
    runtime.register(echo_tool("echo"))


async def _close_inside_a_nested_task_group(runtime: ptc.ToolRuntime) -> None:
    async with runtime:
        async with anyio.create_task_group():
            await runtime.close()


async def _close_from_another_task(runtime: ptc.ToolRuntime) -> None:
    async with runtime, anyio.create_task_group() as tg:
        tg.start_soon(runtime.close)


async def _enter_inside_a_group_close_after(runtime: ptc.ToolRuntime) -> None:
    async with anyio.create_task_group() as tg:
        await runtime.__aenter__()
        tg.start_soon(anyio.sleep, 0)
    await runtime.close()


async def _close_twice(runtime: ptc.ToolRuntime) -> None:
    async with runtime:
        await runtime.close()
    await runtime.close()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "nesting",
    [
        _close_inside_a_nested_task_group,
        _close_from_another_task,
        _enter_inside_a_group_close_after,
        _close_twice,
    ],
)
async def test_closing_is_clean_in_every_nesting_order(
    nesting: Any, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = ptc.ToolRuntime()
    done = anyio.Event()
    with caplog.at_level(logging.DEBUG):
        async with anyio.create_task_group() as tg:
            await runtime.__aenter__()  # entered once more for the listener: aclose is idempotent
            await _change_listener_pending(runtime, done)
            tg.start_soon(anyio.sleep, 0)
        await nesting(runtime)
        # Any late noise comes from a callback that is ready now: run them all first.
        await anyio.wait_all_tasks_blocked()
    assert runtime.closed
    assert done.is_set()  # aclose waited for the pending listener
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert noisy == [], [r.getMessage() for r in noisy]
