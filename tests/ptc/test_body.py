"""The cancellation matrix, signal fusion in the execute waterfall, timeouts, cooperative bodies."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import ptc
from ptc._calls._body import BodyFailure
from tests._typing import data

from .helpers import echo_tool, recorder

pytestmark = pytest.mark.anyio


def code(result: ptc.ToolResult) -> str | None:
    return result.error.code if result.error else None


async def call_and_cancel(
    runtime: ptc.ToolRuntime, name: str, started: anyio.Event, signal: ptc.CancelSignal
) -> ptc.ToolResult:
    results: list[ptc.ToolResult] = []

    async def run() -> None:
        results.append(await runtime.root.call(name, {}, signal=signal))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        signal.cancel("stop")
    return results[0]


async def test_pre_aborted_call_never_reaches_pre_execute() -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(echo_tool("echo"))
    seen: list[Any] = []
    runtime.on("tools/pre-execute", recorder(seen))
    signal = ptc.CancelSignal()
    signal.cancel()
    result = await runtime.root.call("echo", {}, signal=signal)
    assert code(result) == "ABORTED_BEFORE_DISPATCH" and seen == []
    assert result.error.message == "tool call aborted before dispatch"  # type: ignore[union-attr]


async def test_signal_fired_during_pre_execute_is_aborted_before_dispatch() -> None:
    runtime = ptc.ToolRuntime()
    ran: list[bool] = []
    runtime.register(echo_tool("t", execute=lambda a, c: ran.append(True)))
    signal = ptc.CancelSignal()

    async def pre(ex: Any, nxt: Any) -> Any:
        signal.cancel()
        return await nxt()

    runtime.on("tools/pre-execute", pre)
    assert code(await runtime.root.call("t", {}, signal=signal)) == "ABORTED_BEFORE_DISPATCH"
    assert ran == []


async def test_signal_fired_while_an_async_body_runs_is_aborted() -> None:
    runtime = ptc.ToolRuntime()
    started = anyio.Event()

    async def body(arguments: Any, context: ptc.ToolContext) -> Any:
        started.set()
        await anyio.sleep_forever()

    runtime.register(echo_tool("hang", execute=body))
    result = await call_and_cancel(runtime, "hang", started, ptc.CancelSignal())
    assert code(result) == "ABORTED" and result.error.message == "tool call aborted"  # type: ignore[union-attr]


async def test_a_sync_body_is_abandoned_on_abort_and_can_poll_the_signal() -> None:
    runtime = ptc.ToolRuntime()
    started = anyio.Event()
    release = threading.Event()
    polled: list[bool] = []

    def body(arguments: Any, context: ptc.ToolContext) -> Any:
        anyio.from_thread.run_sync(started.set)
        release.wait(10)
        polled.append(context.signal.cancelled)
        return "late"

    runtime.register(echo_tool("sync", execute=body))
    result = await call_and_cancel(runtime, "sync", started, ptc.CancelSignal())
    assert code(result) == "ABORTED"
    release.set()


async def test_success_after_the_signal_fired_is_still_aborted() -> None:
    runtime = ptc.ToolRuntime()
    signal = ptc.CancelSignal()

    async def body(arguments: Any, context: ptc.ToolContext) -> Any:
        signal.cancel()
        return 1  # returned without a checkpoint after the signal

    runtime.register(echo_tool("t", execute=body))
    assert code(await runtime.root.call("t", {}, signal=signal)) == "ABORTED"


async def test_a_wrapper_may_swap_the_signal_but_cannot_detach_the_callers() -> None:
    runtime = ptc.ToolRuntime()
    started = anyio.Event()
    seen: list[ptc.CancelSignal] = []

    async def body(arguments: Any, context: ptc.ToolContext) -> Any:
        seen.append(context.signal)
        started.set()
        await anyio.sleep_forever()

    own = ptc.CancelSignal()

    async def detach(ex: Any, nxt: Any) -> Any:
        return await nxt(signal=own)

    runtime.register(echo_tool("hang", execute=body))
    runtime.on("tools/execute", detach)
    result = await call_and_cancel(runtime, "hang", started, ptc.CancelSignal())
    assert code(result) == "ABORTED"
    assert seen[0] is not own and not own.cancelled


async def test_the_wrappers_own_signal_cancels_the_body() -> None:
    runtime = ptc.ToolRuntime()

    async def body(arguments: Any, context: ptc.ToolContext) -> Any:
        await anyio.sleep_forever()

    async def wrapper(ex: Any, nxt: Any) -> Any:
        own = ptc.CancelSignal()
        own.cancel("wrapper gave up")
        return await nxt(signal=own)

    runtime.register(echo_tool("hang", execute=body))
    runtime.on("tools/execute", wrapper)
    assert code(await runtime.root.call("hang", {})) == "ABORTED"


async def test_execute_wrappers_can_retry_and_each_attempt_gets_its_timeout() -> None:
    runtime = ptc.ToolRuntime()
    attempts: list[int] = []

    async def body(arguments: Any, context: ptc.ToolContext) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            await anyio.sleep_forever()
        return "second"

    async def retry(ex: Any, nxt: Any) -> Any:
        first = await nxt()
        return first if not first.is_error else await nxt()

    runtime.register(echo_tool("flaky", execute=body, timeout_seconds=0.05))
    runtime.on("tools/execute", retry)
    result = await runtime.root.call("flaky", {})
    assert result.value == "second" and len(attempts) == 2


async def test_timeout_is_its_own_code() -> None:
    runtime = ptc.ToolRuntime()

    async def body(arguments: Any, context: ptc.ToolContext) -> Any:
        await anyio.sleep_forever()

    runtime.register(echo_tool("slow", execute=body, timeout_seconds=0.01))
    result = await runtime.root.call("slow", {})
    assert code(result) == "TIMEOUT" and "timed out after 0.01 s" in result.error.message  # type: ignore[union-attr]


async def test_a_cooperative_body_is_not_cancelled_and_keeps_its_aborted_message() -> None:
    import dataclasses

    runtime = ptc.ToolRuntime()
    started = anyio.Event()

    async def body(arguments: Any, context: ptc.ToolContext) -> Any:
        started.set()
        await context.signal.wait()
        await anyio.lowlevel.checkpoint()  # still running after the signal: it was not cancelled
        raise BodyFailure("ABORTED", "tool call aborted\nCaptured output:\nhello", {"k": 1})

    definition = dataclasses.replace(echo_tool("coop", execute=body), cooperative_cancel=True)
    runtime.register(definition)
    result = await call_and_cancel(runtime, "coop", started, ptc.CancelSignal())
    assert code(result) == "ABORTED" and "Captured output" in result.error.message  # type: ignore[union-attr]
    assert result.meta == {"k": 1}


# -- ToolReturn and ToolUnavailable ----------------------------------------------------------

IMAGE = {"type": "image", "data": "aGk=", "mimeType": "image/png"}


def returning(value: Any, content: Any, schema: Any = None) -> ptc.ToolDefinition:
    def render(v: Any) -> list[ptc.ContentBlock]:
        raise AssertionError("render must be skipped for a ToolReturn")

    return echo_tool(
        "shown",
        execute=lambda a, c: ptc.ToolReturn(value, content),
        output=ptc.Output(schema or {"type": "string"}, render),
    )


async def test_a_tool_return_gives_the_content_and_the_value_separately() -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(returning("a dot", [{"type": "text", "text": "look:"}, IMAGE]))
    result = await runtime.root.call("shown", {})
    assert not result.is_error and result.value == "a dot"
    assert result.content == [{"type": "text", "text": "look:"}, IMAGE]
    with pytest.raises(TypeError):
        data(result.content)[1]["data"] = "x"


async def test_a_tool_return_value_still_meets_the_output_schema() -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(returning(42, [IMAGE], {"type": "string"}))
    result = await runtime.root.call("shown", {})
    assert code(result) == "INVALID_OUTPUT"
    assert '42 is not of type "string"' in result.error.message  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "content", ["text", [{"no": "type"}], [{"type": "text", "text": float("nan")}]]
)
async def test_bad_tool_return_content_is_a_tool_error(content: Any) -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(returning("v", content))
    result = await runtime.root.call("shown", {})
    assert code(result) == "TOOL_ERROR" and "returned bad content" in result.error.message  # type: ignore[union-attr]


async def test_post_execute_still_applies_to_a_tool_return() -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(returning("a dot", [IMAGE]))
    async def block(post: Any, nxt: Any) -> Any:
        assert post.result.content[0] == IMAGE  # the listener sees the tool's own content
        return ptc.Block("no pictures")

    runtime.on("tools/post-execute", block)
    result = await runtime.root.call("shown", {})
    assert code(result) == "BLOCKED" and result.content == [
        {"type": "text", "text": "Error: no pictures"}
    ]


async def test_tool_unavailable_is_its_own_code() -> None:
    def down(arguments: Any, context: Any) -> Any:
        raise ptc.ToolUnavailable("the backing service is down")

    runtime = ptc.ToolRuntime()
    runtime.register(echo_tool("remote", execute=down))
    result = await runtime.root.call("remote", {})
    assert code(result) == "TOOL_UNAVAILABLE"
    assert result.content == [{"type": "text", "text": "Error: the backing service is down"}]
    assert "TOOL_UNAVAILABLE" in ptc.ERROR_CODES
