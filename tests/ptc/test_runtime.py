"""ToolRuntime: construction checks, lifetime, code-mode hooks and async change listeners."""

from __future__ import annotations

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
    await runtime.aclose()


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
