"""``ptc.mcp.serve`` under hostile or careless clients (DESIGN section 9, "Hostile peers" and
"Serving over HTTP lets in only who belongs"): bounded concurrent runs with a clear busy
answer, a disconnect that cancels its run, and, over HTTP, a bearer token and a Host check
off loopback. Clients are the official SDK's, or raw HTTP where it cannot misbehave enough;
everything listens on this machine only (0.0.0.0 is reached through 127.0.0.1)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.memory import create_client_server_memory_streams

import ptc
from ptc import mcp as ptc_mcp
from tests._typing import data

from .conftest import INITIALIZE, serving, wait_for

pytestmark = pytest.mark.anyio

TOKEN = "a-test-token-0123456789abcdef"
ACCEPT = {"accept": "application/json, text/event-stream"}


def coder(runtime: ptc.ToolRuntime) -> ptc.Scope:
    @runtime.tool
    def secret_tool(x: int) -> int:
        """Only the right clients may call this."""
        return x + 1

    scope = runtime.scope("coder")
    scope.present_as("both")
    return scope


@asynccontextmanager
async def official_client(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"authorization": f"Bearer {token}"} if token else None
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(*streams) as session,
    ):
        with anyio.fail_after(20):
            await session.initialize()
        yield session


async def raw_initialize(url: str, **headers: str) -> httpx2.Response:
    async with httpx2.AsyncClient() as http:
        with anyio.fail_after(20):
            return await http.post(url, json=INITIALIZE, headers={**ACCEPT, **headers})


# -- who may connect --------------------------------------------------------------------


async def test_off_loopback_only_a_client_with_the_token_gets_in() -> None:
    async with ptc.ToolRuntime() as runtime:
        scope = coder(runtime)
        options = {"auth": ptc_mcp.BearerToken(TOKEN), "allowed_hosts": ["127.0.0.1"]}
        async with serving(scope, host="0.0.0.0", **options) as url:
            async with official_client(url, TOKEN) as session:
                listed = [t.name for t in (await session.list_tools()).tools]
                assert listed == ["secret_tool", "run_code"]
                called = await session.call_tool("secret_tool", {"x": 1})
                assert called.structured_content == {"result": 2}
            for headers in ({}, {"authorization": "Bearer wrong-token-0123456789"},
                            {"authorization": f"Basic {TOKEN}"}):  # fmt: skip
                refused = await raw_initialize(url, **headers)
                assert refused.status_code == 401, refused.text
                assert refused.headers["www-authenticate"].startswith("Bearer")
                assert "secret_tool" not in refused.text and "serverInfo" not in refused.text
            with pytest.raises(BaseExceptionGroup) as refused_client:  # no token: no session
                async with official_client(url, None):
                    pass
            assert refused_client.group_contains(MCPError, match="error response")


@pytest.mark.parametrize("bound", ["127.0.0.1", "0.0.0.0"])
async def test_a_request_naming_another_host_is_refused(bound: str) -> None:
    async with ptc.ToolRuntime() as runtime:
        scope = coder(runtime)
        secured = {"auth": ptc_mcp.BearerToken(TOKEN), "allowed_hosts": ["127.0.0.1"]}
        options = secured if bound == "0.0.0.0" else {}
        token = {"authorization": f"Bearer {TOKEN}"}
        async with serving(scope, host=bound, **options) as url:
            rebound = await raw_initialize(url, host="anything.example", **token)
            assert rebound.status_code == 421, rebound.text
            foreign_page = await raw_initialize(url, origin="http://anything.example", **token)
            assert foreign_page.status_code == 403, foreign_page.text
            assert (await raw_initialize(url, **token)).status_code == 200


@pytest.mark.parametrize(
    ("options", "missing"),
    [
        ({}, "needs auth= (a ptc.mcp.BearerToken or a TokenVerifier) and allowed_hosts="),
        ({"auth": ptc_mcp.BearerToken(TOKEN)}, "needs allowed_hosts="),
        ({"allowed_hosts": ["example.internal"]}, "needs auth="),
    ],
)
async def test_off_loopback_serve_refuses_to_start_without_auth_and_hosts(
    options: dict[str, Any], missing: str
) -> None:
    async with ptc.ToolRuntime() as runtime:
        pattern = f"not a loopback address.*{re.escape(missing)}"
        with pytest.raises(ptc.ConfigurationError, match=pattern):
            await ptc_mcp.serve(runtime.root, "streamable-http", host="0.0.0.0", port=0, **options)


async def test_insecure_no_auth_serves_anyone_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    async with ptc.ToolRuntime() as runtime:
        scope = coder(runtime)
        with caplog.at_level(logging.WARNING, "ptc.mcp"):
            async with serving(scope, host="0.0.0.0", insecure_no_auth=True) as url:
                assert (await raw_initialize(url)).status_code == 200
        assert "without authentication (insecure_no_auth=True)" in caplog.text


# -- how many runs at once ----------------------------------------------------------------


@asynccontextmanager
async def in_memory(served: Any) -> AsyncIterator[ClientSession]:
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        async with anyio.create_task_group() as group:
            group.start_soon(served.run, *server_streams, served.create_initialization_options())
            async with ClientSession(*client_streams) as session:
                await session.initialize()
                yield session
            group.cancel_scope.cancel()


async def test_runs_beyond_the_limit_wait_and_beyond_the_queue_are_told_busy() -> None:
    release = anyio.Event()
    inside = {"now": 0, "peak": 0}
    async with ptc.ToolRuntime() as runtime:

        @runtime.tool
        async def hold() -> str:
            """Wait until the test lets go."""
            inside["now"] += 1
            inside["peak"] = max(inside["peak"], inside["now"])
            await release.wait()
            inside["now"] -= 1
            return "held"

        scope = runtime.scope("agent")
        scope.present_as("code")
        served = ptc_mcp.server(scope, max_concurrent_runs=2, max_queued_runs=1)
        results: list[types.CallToolResult] = []
        async with in_memory(served) as session, anyio.create_task_group() as group:

            async def run() -> None:
                results.append(await session.call_tool("run_code", {"code": "return tools.hold()"}))

            for _ in range(5):
                group.start_soon(run)
            with anyio.fail_after(60):
                await wait_for(lambda: len(results) == 2 and inside["now"] == 2, seconds=60)
            for busy in results:  # answered at once, without a run
                assert busy.is_error and busy.meta is not None
                assert busy.meta["ptc/error"]["code"] == "TOOL_UNAVAILABLE"
                assert "busy: 2 runs are running and 1 waiting" in busy.meta["ptc/error"]["message"]
            release.set()
        assert inside["peak"] == 2
        assert [r.structured_content for r in results[2:]] == [{"result": "held", "stdout": ""}] * 3


async def test_a_run_cancelled_while_it_waits_ends_without_waiting_for_a_slot() -> None:
    entered, release = anyio.Event(), anyio.Event()
    ended: list[ptc.ToolResult] = []
    async with ptc.ToolRuntime() as runtime:

        @runtime.tool
        async def hold() -> str:
            """Wait until the test lets go."""
            entered.set()
            await release.wait()
            return "held"

        runtime.on("tools/result", lambda r: ended.append(r) if r.name == "run_code" else None)
        scope = runtime.scope("agent")
        scope.present_as("code")
        served = ptc_mcp.server(scope, max_concurrent_runs=1)
        async with in_memory(served) as session, anyio.create_task_group() as group:
            group.start_soon(session.call_tool, "run_code", {"code": "return tools.hold()"})
            with anyio.fail_after(60):
                await entered.wait()  # the one slot is taken
            async with anyio.create_task_group() as waiter:
                waiter.start_soon(session.call_tool, "run_code", {"code": "return 'never'"})
                await anyio.wait_all_tasks_blocked()
                waiter.cancel_scope.cancel()  # the client gives up on the queued run
            await wait_for(lambda: ended)
            assert not release.is_set()  # it did not wait for the slot to free up
            assert ended[0].error is not None and ended[0].error.code.startswith("ABORTED")
            release.set()
        assert len(ended) == 2 and ended[1].value == {"result": "held", "stdout": ""}


def test_the_default_number_of_runs_follows_the_machine() -> None:
    from ptc.mcp._admission import default_max_runs

    assert default_max_runs(10**7) == 1  # 10 TiB per run: one at a time
    assert 1 <= default_max_runs(64) <= 2 * len(__import__("os").sched_getaffinity(0))


# -- a client that goes away -------------------------------------------------------------


async def test_an_http_client_that_disconnects_cancels_its_run() -> None:
    ticked = anyio.Event()
    ended: list[ptc.ToolResult] = []
    async with ptc.ToolRuntime() as runtime:

        @runtime.tool
        def tick() -> int:
            """One step of a long job."""
            ticked.set()
            return 1

        runtime.on("tools/result", lambda r: ended.append(r) if r.name == "run_code" else None)
        scope = runtime.scope("agent")
        scope.present_as("code")
        async with serving(scope) as url, httpx2.AsyncClient(timeout=30) as http:
            init = await http.post(url, json=INITIALIZE, headers=ACCEPT)
            session = {"mcp-session-id": init.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-11-25", **ACCEPT}  # fmt: skip
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(url, json=note, headers=session)).status_code == 202
            program = "import time\nwhile True:\n    tools.tick()\n    time.sleep(0.01)"
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "run_code", "arguments": {"code": program}}}  # fmt: skip
            async with http.stream("POST", url, json=call, headers=session) as response:
                assert response.status_code == 200
                with anyio.fail_after(60):
                    await ticked.wait()
            # Leaving the stream unread closes its connection: the client is gone.
            await wait_for(lambda: ended, seconds=30)
    # Left running, it would have ended by its call limit (CODE_RUN_FAILED) seconds later.
    assert ended[0].error is not None and ended[0].error.code == "ABORTED", ended[0].error


# -- the stdio transport ------------------------------------------------------------------


async def test_stdio_serve_survives_invalid_utf8_and_oversized_lines(tmp_path: Path) -> None:
    command = ["-m", "ptc", "serve", "--mode", "native", "tools:register"]
    (tmp_path / "tools.py").write_text(
        "def register(runtime):\n"
        "    @runtime.tool\n"
        "    def echo(text: str) -> str:\n"
        '        """Say it back."""\n'
        "        return text\n"
    )
    import sys

    process = await anyio.open_process([sys.executable, *command], cwd=tmp_path)
    assert process.stdin is not None and process.stdout is not None
    lines = _Lines(process.stdout)
    try:
        with anyio.fail_after(60):
            await process.stdin.send(json.dumps(INITIALIZE).encode() + b"\n")
            assert (await lines.next())["id"] == 1
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await process.stdin.send(json.dumps(initialized).encode() + b"\n")
            await process.stdin.send(b"\xff\xfe not json\n")  # logged and ignored
            huge = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "x" * (5 << 20)}}}  # fmt: skip
            await process.stdin.send(json.dumps(huge).encode() + b"\n")
            refused = await lines.next()
            assert refused["id"] == 7 and "the limit is 4,194,304" in refused["error"]["message"]
            text = {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "caf\u00e9"}}}  # fmt: skip
            await process.stdin.send(json.dumps(text).encode() + b"\n")
            echoed = await lines.next()
            assert echoed["id"] == 8 and data(echoed)["result"]["structuredContent"] == {
                "result": "caf\u00e9"
            }
    finally:
        process.kill()
        await process.aclose()


class _Lines:
    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._buffer = b""

    async def next(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            self._buffer += await self._stream.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        decoded: dict[str, Any] = json.loads(line)
        return decoded
