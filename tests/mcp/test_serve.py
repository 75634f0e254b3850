"""Serving a scope (``ptc.mcp.server``) to the official MCP client, in process over the
SDK's memory streams: tools/list, tools/call with structured content the client validates,
``_meta["ptc/run"]``, errors, cancellation and list_changed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.client.session import IncomingMessage
from mcp.shared.memory import create_client_server_memory_streams
from typing_extensions import TypedDict

import ptc
from ptc import mcp as ptc_mcp

from .conftest import wait_for

pytestmark = pytest.mark.anyio

IMAGE = {"type": "image", "data": "aGk=", "mimeType": "image/png"}


class Hit(TypedDict):
    id: str
    score: float


@asynccontextmanager
async def connected(
    scope: ptc.Scope, heard: list[IncomingMessage] | None = None
) -> AsyncIterator[ClientSession]:
    """The official client, connected to ``ptc_mcp.server(scope)`` over memory streams."""
    served = ptc_mcp.server(scope)

    async def on_message(message: IncomingMessage) -> None:
        if heard is not None:
            heard.append(message)

    async with create_client_server_memory_streams() as (client_streams, server_streams):
        async with anyio.create_task_group() as group:
            group.start_soon(served.run, *server_streams, served.create_initialization_options())
            async with ClientSession(*client_streams, message_handler=on_message) as session:
                init = await session.initialize()
                assert init.capabilities.tools is not None and init.capabilities.tools.list_changed
                yield session
            group.cancel_scope.cancel()


def register_tools(runtime: ptc.ToolRuntime) -> None:
    @runtime.tool
    def count(items: list[str]) -> int:
        """Count items."""
        return len(items)

    @runtime.tool
    def search(query: str) -> list[Hit]:
        """Search."""
        return [{"id": query, "score": 1.0}]

    @runtime.tool
    def best(query: str) -> Hit:
        """The best hit."""
        return {"id": query, "score": 0.5}

    @runtime.tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    runtime.register(
        ptc.define_tool(
            name="photo",
            description="A photo.",
            input_schema={"type": "object"},
            output=ptc.Output({"type": "string"}, lambda v: [{"type": "text", "text": str(v)}]),
            execute=lambda a, c: ptc.ToolReturn("a photo", [IMAGE]),
            title="Photo",
            annotations={"readOnlyHint": True},
            meta={"ui/kind": "media"},
        )
    )


def wire(tool: types.Tool) -> dict[str, Any]:
    return tool.model_dump(by_alias=True, mode="json", exclude_none=True)


async def test_tools_list_is_model_tools_and_results_pass_the_clients_checks() -> None:
    async with ptc.ToolRuntime() as runtime:
        register_tools(runtime)
        async with connected(runtime.root) as session:
            listed = (await session.list_tools()).tools
            assert [wire(t) for t in listed] == runtime.root.model_tools(format="mcp")
            by_name = {t.name: t for t in listed}
            assert by_name["count"].output_schema == {
                "type": "object",
                "properties": {"result": {"type": "integer"}},
                "required": ["result"],
            }
            assert by_name["photo"].title == "Photo"
            assert by_name["photo"].meta == {"ui/kind": "media"}
            assert by_name["photo"].annotations is not None
            assert by_name["photo"].annotations.read_only_hint is True
            # call_tool validates structuredContent against the listed outputSchema.
            counted = await session.call_tool("count", {"items": ["a", "b", "c"]})
            assert counted.structured_content == {"result": 3} and not counted.is_error
            searched = await session.call_tool("search", {"query": "q"})
            assert searched.structured_content == {"result": [{"id": "q", "score": 1.0}]}
            best = await session.call_tool("best", {"query": "q"})
            assert best.structured_content == {"id": "q", "score": 0.5}  # an object, as is
            photo = await session.call_tool("photo", {})
            assert [c.type for c in photo.content] == ["image"]
            assert photo.structured_content == {"result": "a photo"}


async def test_failures_are_is_error_results_with_their_code() -> None:
    async with ptc.ToolRuntime() as runtime:
        register_tools(runtime)
        async with connected(runtime.root) as session:
            broken = await session.call_tool("broken", {})
            assert broken.is_error and broken.structured_content is None
            assert broken.meta == {"ptc/error": {"code": "TOOL_ERROR", "message": "disk on fire"}}
            assert broken.content[0].text == "Error: disk on fire"  # type: ignore[union-attr]
            unknown = await session.call_tool("nope", {})
            assert unknown.is_error and unknown.meta["ptc/error"]["code"] == "UNKNOWN_TOOL"  # type: ignore[index]
            invalid = await session.call_tool("count", {"items": "abc"})
            assert invalid.meta["ptc/error"]["code"] == "INVALID_ARGS"  # type: ignore[index]


async def test_a_code_mode_scope_serves_run_code_with_its_run_report() -> None:
    async with ptc.ToolRuntime() as runtime:
        register_tools(runtime)
        coder = runtime.scope("coder")
        coder.present_as("code")
        async with connected(coder) as session:
            listed = (await session.list_tools()).tools
            assert [t.name for t in listed] == ["run_code"]
            assert listed[0].title == "Run code"
            program = (
                "print('counting')\n"
                "return tools.count(items=['a', 'b']) + len(tools.search(query='x'))"
            )
            ran = await session.call_tool("run_code", {"code": program})
            assert not ran.is_error
            assert ran.structured_content == {"result": 3, "stdout": "counting\n"}
            assert ran.meta is not None
            report = ran.meta["ptc/run"]
            assert set(report) == {"dispatch_log", "enforcement", "stats"}
            assert [e["name"] for e in report["dispatch_log"]] == ["count", "search"]
            assert report["stats"]["calls"] == 2
            # Direct calls of the native tools are collapsed in code mode.
            direct = await session.call_tool("count", {"items": []})
            assert direct.is_error and "run_code" in direct.content[0].text  # type: ignore[union-attr]
            failed = await session.call_tool("run_code", {"code": "return 1/0"})
            assert failed.is_error and failed.meta is not None
            assert failed.meta["ptc/error"]["code"] == "CODE_RUN_FAILED"
            assert "stats" in failed.meta["ptc/run"]


async def test_a_clients_cancel_fires_the_calls_signal() -> None:
    started = anyio.Event()
    reasons: list[object] = []
    results: list[ptc.ToolResult] = []
    async with ptc.ToolRuntime() as runtime:

        @runtime.tool
        async def wait(context: ptc.ToolContext) -> str:
            """Wait until cancelled."""
            started.set()
            try:
                await anyio.sleep(30)
            finally:
                reasons.append(context.signal.reason)
            return "slept"

        runtime.on("tools/result", results.append)
        async with connected(runtime.root) as session, anyio.create_task_group() as group:

            async def call() -> None:
                await session.call_tool("wait", {})

            group.start_soon(call)
            await started.wait()
            group.cancel_scope.cancel()  # the client abandons the request: notifications/cancelled
        await wait_for(lambda: results)
    assert reasons == ["cancelled by the MCP client"]
    assert results[0].error is not None and results[0].error.code == "ABORTED"


async def test_tool_changes_that_affect_the_scope_send_list_changed() -> None:
    heard: list[IncomingMessage] = []

    def announcements() -> int:
        return sum(isinstance(m, types.ToolListChangedNotification) for m in heard)

    async def tools(session: ClientSession) -> list[str]:
        return [t.name for t in (await session.list_tools()).tools]

    async with ptc.ToolRuntime() as runtime:
        agent = runtime.scope("agent")
        other = runtime.scope("other")
        async with connected(agent, heard) as session:
            assert await tools(session) == []
            runtime.register(ptc.tool(lambda: 1, name="one", description="One."))  # on an ancestor
            await wait_for(lambda: announcements() == 1)
            assert await tools(session) == ["one"]
            other.register(ptc.tool(lambda: 2, name="two", description="Two."))  # a sibling
            assert await tools(session) == ["one"]  # (apart from the burst: see the fence)
            with agent.batch():  # a burst is announced once
                agent.register(ptc.tool(lambda: 3, name="three", description="Three."))
                agent.restrict(deny=["one"])
            await wait_for(lambda: announcements() == 2)
            assert await tools(session) == ["three"]
            # The fence: a change's announcement is sent a scheduling step after the change,
            # so one for the sibling or a second one for the burst would be sent before this
            # change's; the reply to a later request comes after all three.
            agent.register(ptc.tool(lambda: 4, name="four", description="Four."))
            await wait_for(lambda: announcements() >= 3)
            assert await tools(session) == ["three", "four"]
            assert announcements() == 3


async def test_a_programs_output_reaches_the_client_while_it_runs() -> None:
    async with ptc.ToolRuntime() as runtime:
        released = anyio.Event()
        heard: list[tuple[float, str | None]] = []

        @runtime.tool
        async def gate() -> str:
            """Wait until the client has seen the first line."""
            await released.wait()
            return "open"

        coder = runtime.scope("coder")
        coder.present_as("code")

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            heard.append((progress, message))
            if message and "first" in message:
                released.set()  # the run still waits on the gate: this is live output

        async with connected(coder) as session:
            with anyio.fail_after(60):
                ran = await session.call_tool(
                    "run_code",
                    {"code": "print('first')\nprint(tools.gate())"},
                    progress_callback=on_progress,
                )
    assert not ran.is_error and ran.structured_content == {
        "result": None, "stdout": "first\nopen\n"
    }
    assert heard == [(6.0, "first\n"), (11.0, "open\n")]
