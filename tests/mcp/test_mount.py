"""Mounting a server built with the official SDK (tests/mcp/toy_server.py), over stdio: the
section-9 mapping rules, policies for bad schemas, list_changed, cancellation, a killed
server and servers that cannot be mounted at all."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc
from ptc import mcp as ptc_mcp
from tests._typing import data

from .conftest import marker_text, toy, wait_for
from .toy_server import PNG

pytestmark = pytest.mark.anyio

TOY_NAMES = ["echo", "picture", "fail", "add", "bad_output", "slow", "grow"]


def code(result: ptc.ToolResult) -> str | None:
    return result.error.code if result.error else None


async def test_every_page_is_registered_under_the_prefix_with_its_metadata(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    agent = runtime.scope("agent")
    mounted = await ptc_mcp.mount(agent, toy(tmp_path), prefix="toy_")
    # Seven tools over three pages of three.
    assert mounted.names == tuple(f"toy_{n}" for n in TOY_NAMES)
    assert mounted.server_info["name"] == "toy" and mounted.connected
    visible = agent.view().visible
    echo, add, picture = visible["toy_echo"], visible["toy_add"], visible["toy_picture"]
    assert echo.title == "Echo" and echo.meta == {"toy/kind": "text"}
    assert echo.annotations == {"readOnlyHint": True}
    assert echo.concurrency_safe is True and add.concurrency_safe is True
    assert picture.concurrency_safe is None and picture.title is None
    assert echo.output.schema == {"type": "string"}
    assert add.output.schema["required"] == ["sum"]
    # The tools live in the scope's own layer only.
    assert "toy_echo" not in runtime.root.view().visible


async def test_values_content_and_errors_follow_the_mapping(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    await ptc_mcp.mount(runtime.root, toy(tmp_path))
    call = runtime.root.call

    echo = await call("echo", {"text": "hi"})
    assert echo.value == "hi" and echo.content == [{"type": "text", "text": "hi"}]

    picture = await call("picture", {})
    assert picture.value == "a red dot"  # the text blocks, joined
    assert picture.content[1] == {"type": "image", "data": PNG, "mimeType": "image/png"}

    add = await call("add", {"a": 2, "b": 3})
    assert add.value == {"sum": 5}  # structuredContent
    assert add.content == [{"type": "text", "text": '{"sum": 5}'}]

    fail = await call("fail", {"reason": "no"})
    assert code(fail) == "TOOL_ERROR"
    assert fail.error.message == "the toy refuses: no"  # type: ignore[union-attr]

    bad = await call("bad_output", {})
    assert code(bad) == "INVALID_OUTPUT" and '"many" is not of type "integer"' in str(bad.error)

    invalid = await call("add", {"a": "two", "b": 3})  # ptc checks arguments first
    assert code(invalid) == "INVALID_ARGS"


async def test_a_program_over_the_mount_gets_the_same_answers(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    agent = runtime.scope("agent")
    await ptc_mcp.mount(agent, toy(tmp_path))
    native = [await agent.call("add", {"a": i, "b": 10}) for i in range(4)]
    agent_code = agent.scope("coder")
    agent_code.present_as("code")
    program = """
sums = tools.add.map([{"a": i, "b": 10} for i in range(4)])
try:
    tools.fail(reason="x")
except ToolCallError as exc:
    failed = [exc.tool, exc.code, exc.message]
return {"sums": sums, "echo": tools.echo(text="hi"), "picture": tools.picture(), "failed": failed}
"""
    result = await agent_code.run_code(program)
    assert not result.is_error, result.error
    assert data(result.value)["result"] == {
        "sums": [r.value for r in native],
        "echo": "hi",
        "picture": "a red dot",
        "failed": ["fail", "TOOL_ERROR", "the toy refuses: x"],
    }
    # The image stays in the host's record of the nested call, never in the program.
    log = data(result.meta)["dispatch_log"]
    assert [e["name"] for e in log] == ["add"] * 4 + ["fail", "echo", "picture"]
    assert log[-1]["content"][1]["type"] == "image"


async def test_a_name_clash_is_a_value_error_naming_both(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    @runtime.tool
    def echo(text: str) -> str:
        """The host's own echo."""
        return text

    agent = runtime.scope("agent")
    clash = r"MCP tool 'echo' of .*toy_server.py.* already has a tool 'echo'"
    with pytest.raises(ValueError, match=clash):
        await ptc_mcp.mount(agent, toy(tmp_path))
    assert set(agent.view().visible) == {"echo"}  # nothing half-registered
    mounted = await ptc_mcp.mount(agent, toy(tmp_path), prefix="toy_")
    assert "toy_echo" in mounted.names


async def test_bad_schemas_follow_the_policy(runtime: ptc.ToolRuntime, tmp_path: Path) -> None:
    server = toy(tmp_path, "--bad-schema")
    with pytest.raises(ptc.SchemaError, match=r"legacy.*dict"):
        await ptc_mcp.mount(runtime.scope("strict"), server)

    skipping = await ptc_mcp.mount(runtime.scope("skip"), server, on_bad_schema="skip")
    assert "legacy" not in skipping.names and len(skipping.names) == len(TOY_NAMES)
    assert "dict" in skipping.skipped["legacy"]

    # "lenient" registers what ptc.lenient_schema makes of it, or raises if that is not enough.
    legacy = {"type": "object", "properties": {"x": {"type": "dict"}}}
    rewritten, notes = ptc.lenient_schema(legacy)
    try:
        ptc.define_tool(
            name="probe",
            description="probe",
            input_schema=rewritten,
            output=ptc.Output({}, lambda v: []),
            execute=lambda a, c: None,
        )
    except ptc.SchemaError:
        with pytest.raises(ptc.SchemaError, match="legacy"):
            await ptc_mcp.mount(runtime.scope("lenient"), server, on_bad_schema="lenient")
    else:
        scope = runtime.scope("lenient")
        lenient = await ptc_mcp.mount(scope, server, on_bad_schema="lenient")
        assert lenient.notes["legacy"] == tuple(f"inputSchema: {n}" for n in notes)
        assert scope.view().visible["legacy"].input_schema == rewritten


async def test_list_changed_re_registers_with_one_tools_change(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    agent = runtime.scope("agent")
    mounted = await ptc_mcp.mount(agent, toy(tmp_path))

    def extra() -> str:  # "Appeared later (grown Nx).": the listing after the Nth `grow`
        seen = agent.view().visible.get("extra")
        return "" if seen is None else seen.description

    changes: list[tuple[ptc.Scope, str]] = []
    agent.on("tools/change", lambda s: changes.append((s, extra())))
    assert (await agent.call("grow", {})).value == "grown"
    await wait_for(lambda: "grown 1x" in extra())
    # The fence: a second list_changed, told apart by its listing, goes through the same
    # reader and the same one-at-a-time re-listing: a second change from the first one would
    # come before the change of this one, which we wait for.
    assert (await agent.call("grow", {})).value == "grown"
    await wait_for(lambda: "grown 2x" in extra())
    assert changes == [
        (agent, "Appeared later (grown 1x)."),
        (agent, "Appeared later (grown 2x)."),
    ]
    assert mounted.names == (*TOY_NAMES, "extra")
    assert (await agent.call("extra", {})).value == "extra!"


async def test_the_calls_signal_cancels_the_request_on_the_server(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    await ptc_mcp.mount(runtime.root, toy(tmp_path))
    marker = tmp_path / "slow"
    cancel = ptc.CancelSignal()
    results: list[ptc.ToolResult] = []

    async def call() -> None:
        results.append(await runtime.root.call("slow", {"seconds": 30}, signal=cancel))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await wait_for(lambda: marker_text(marker).startswith("started"))
        cancel.cancel("enough")
    assert code(results[0]) == "ABORTED"
    await wait_for(lambda: marker_text(marker) == "cancelled")
    # The connection is still good.
    assert (await runtime.root.call("echo", {"text": "still here"})).value == "still here"


async def test_timeout_seconds_ends_the_call_and_cancels_it_on_the_server(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    await ptc_mcp.mount(runtime.root, toy(tmp_path), timeout_seconds=0.5)
    result = await runtime.root.call("slow", {"seconds": 30})
    assert code(result) == "TIMEOUT"
    await wait_for(lambda: marker_text(tmp_path / "slow") == "cancelled")


async def test_a_server_killed_mid_call_is_tool_unavailable(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    mounted = await ptc_mcp.mount(runtime.root, toy(tmp_path))
    marker = tmp_path / "slow"
    results: list[ptc.ToolResult] = []

    async def call() -> None:
        results.append(await runtime.root.call("slow", {"seconds": 30}))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await wait_for(lambda: marker_text(marker).startswith("started"))
            os.kill(int(marker_text(marker).split()[1]), signal.SIGKILL)
    assert code(results[0]) == "TOOL_UNAVAILABLE"
    assert "closed the connection" in results[0].error.message  # type: ignore[union-attr]
    after = await runtime.root.call("echo", {"text": "anyone?"})
    assert code(after) == "TOOL_UNAVAILABLE" and not mounted.connected
    await mounted.aclose()
    assert "echo" not in runtime.root.view().visible


@pytest.mark.slow
async def test_aclose_and_runtime_close_disconnect(tmp_path: Path) -> None:
    def pid_of(directory: Path) -> int:
        return int(marker_text(directory / "slow").split()[1])

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    for directory in (tmp_path / "a", tmp_path / "b"):
        directory.mkdir()
    async with ptc.ToolRuntime() as runtime:
        a, b = runtime.scope("a"), runtime.scope("b")
        first = await ptc_mcp.mount(a, toy(tmp_path / "a"))
        second = await ptc_mcp.mount(b, toy(tmp_path / "b"))
        await a.call("slow", {"seconds": 0})
        await b.call("slow", {"seconds": 0})
        first_pid, second_pid = pid_of(tmp_path / "a"), pid_of(tmp_path / "b")
        await first.aclose()
        await first.aclose()  # idempotent
        assert a.view().visible == {} and not first.connected and not alive(first_pid)
        assert second.connected and alive(second_pid)
    assert (second.connected, second.names, alive(second_pid)) == (False, (), False)


@pytest.mark.parametrize(
    ("server", "message"),
    [
        (ptc_mcp.stdio("ptc-no-such-command-x"), "command not found"),
        (ptc_mcp.stdio(sys.executable, "-c", "import sys; sys.exit(3)"), "closed the connection"),
    ],
)
async def test_a_server_that_cannot_start_is_a_mount_error(
    runtime: ptc.ToolRuntime, server: Any, message: str
) -> None:
    with pytest.raises(ptc_mcp.MountError, match=message):
        await ptc_mcp.mount(runtime.root, server)
    assert runtime.root.view().visible == {}


@pytest.mark.slow  # the SDK gives a silent server 2 s to exit before it kills it
async def test_a_server_that_never_answers_is_a_mount_error_in_time(
    runtime: ptc.ToolRuntime,
) -> None:
    silent = ptc_mcp.stdio(sys.executable, "-c", "import time; time.sleep(60)")
    with anyio.fail_after(8), pytest.raises(ptc_mcp.MountError, match="within 1 s"):
        await ptc_mcp.mount(runtime.root, silent, connect_timeout_seconds=1)


async def test_an_unreachable_http_server_is_a_mount_error(runtime: ptc.ToolRuntime) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ptc_mcp.MountError, match=f"127.0.0.1:{port}"):
        await ptc_mcp.mount(runtime.root, ptc_mcp.http(f"http://127.0.0.1:{port}/mcp"))


async def test_mounting_needs_an_entered_runtime(tmp_path: Path) -> None:
    runtime = ptc.ToolRuntime()
    with pytest.raises(ptc.ClosedError, match="async with"):
        await ptc_mcp.mount(runtime.root, toy(tmp_path))
    bad: list[tuple[dict[str, Any], type[Exception]]] = [
        ({"on_bad_schema": "ignore"}, ptc.ConfigurationError),
        ({"prefix": "my tools "}, ptc.UsageError),
        ({"timeout_seconds": 0}, ptc.ConfigurationError),
        ({"timeout_seconds": "5"}, ptc.UsageError),
        ({"connect_timeout_seconds": float("inf")}, ptc.ConfigurationError),
    ]
    for options, error in bad:  # refused before any server is started
        with pytest.raises(error):
            await ptc_mcp.mount(runtime.root, toy(tmp_path), **options)


async def test_a_server_listing_a_name_twice_or_a_name_ptc_refuses(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    server = toy(tmp_path, "--hostile")
    strict = runtime.scope("strict")
    with pytest.raises(ValueError, match="lists 'echo' more than once"):
        await ptc_mcp.mount(strict, server)
    assert strict.view().visible == {}


async def test_garbage_and_malformed_results_stay_tool_errors(
    runtime: ptc.ToolRuntime, tmp_path: Path
) -> None:
    server = toy(tmp_path, "--hostile")
    agent = runtime.scope("agent")
    mounted = await ptc_mcp.mount(agent, server, prefix="h_", on_bad_schema="skip")
    assert set(mounted.skipped) == {"echo (again)", "has space"}
    assert "must match" in mounted.skipped["has space"]
    assert mounted.names == tuple(f"h_{n}" for n in TOY_NAMES)
    echo = await agent.call("h_echo", {"text": "hi"})  # garbage line first, then the answer
    assert echo.value == "hi"
    add = await agent.call("h_add", {"a": 1, "b": 2})
    assert code(add) == "TOOL_ERROR" and "invalid result" in add.error.message  # type: ignore[union-attr]
    assert mounted.connected
    assert (await agent.call("h_picture", {})).value == "a red dot"
