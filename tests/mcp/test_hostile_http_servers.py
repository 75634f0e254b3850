"""Mounting a hostile server over streamable HTTP (tests/mcp/hostile_http_server.py, raw
JSON-RPC on 127.0.0.1, a subprocess): DESIGN section 9, "Hostile peers". A response body
is bounded in JSON values as it is read, each SSE event on its own, and a compressed body
is refused; each refusal fails its call clearly, and the next call works."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc
from ptc import mcp as ptc_mcp

from .conftest import wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HOSTILE_HTTP = Path(__file__).with_name("hostile_http_server.py")
LIMITS = "(limits: mount(max_reply_bytes=, max_reply_blocks=, max_reply_values=))"


@contextmanager
def hostile_http(*args: str) -> Iterator[ptc_mcp.HttpServer]:
    command = [sys.executable, str(HOSTILE_HTTP), *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()  # printed once it listens ("": it died)
            assert url.startswith("http://127.0.0.1:"), f"the server did not start ({url!r})"
            yield ptc_mcp.http(url)
        finally:
            process.terminate()
            process.wait(10)


@pytest.fixture
def server() -> Iterator[ptc_mcp.HttpServer]:
    with hostile_http() as started:
        yield started


@pytest.fixture
async def agent() -> AsyncIterator[ptc.Scope]:
    async with ptc.ToolRuntime() as runtime:
        yield runtime.scope("agent")


async def call(scope: ptc.Scope, name: str, arguments: dict[str, Any]) -> ptc.ToolResult:
    with anyio.fail_after(30):
        return await scope.call(name, arguments)


async def still_answers(scope: ptc.Scope) -> None:
    result = await call(scope, "ok", {"text": "still there?"})
    assert result.value == "still there?", result.error


@pytest.mark.parametrize(
    ("tool", "arguments", "limits", "message"),
    [
        # One JSON body: {"jsonrpc", "id", "result": {"content", "structuredContent": {"v"}}}.
        ("structured", {"n": 1_000_000}, {}, "than max_reply_values=25,000"),
        ("structured", {"n": 994}, {"max_reply_values": 1000}, "than max_reply_values=1,000"),
        # The reply as the last event of an SSE stream, after small notifications.
        ("streamed", {"n": 30_000, "notes": 3}, {}, "than max_reply_values=25,000"),
    ],
)
async def test_a_reply_of_too_many_values_fails_clearly_and_the_next_call_works(
    agent: ptc.Scope,
    server: ptc_mcp.HttpServer,
    tool: str,
    arguments: dict[str, Any],
    limits: dict[str, Any],
    message: str,
) -> None:
    await ptc_mcp.mount(agent, server, **limits)
    result = await call(agent, tool, arguments)
    assert result.error is not None, result.value
    assert result.error.code == "TOOL_ERROR", result.error
    text = result.error.message
    assert f"the reply to tools/call holds more JSON values {message}" in text, text
    assert text.endswith(LIMITS), text
    await still_answers(agent)


@pytest.mark.parametrize(
    ("tool", "arguments", "limits"),
    [
        ("structured", {"n": 993}, {"max_reply_values": 1000}),  # 1,000 values: the limit
        ("structured", {"n": 24_000}, {}),
        # Each SSE event is a message of its own: 5,000 notifications of 7 values each
        # (35,000 in all) do not count against the reply's limit.
        ("streamed", {"n": 24_000, "notes": 5_000}, {}),
    ],
)
async def test_a_reply_within_the_values_limit_passes_whole(
    agent: ptc.Scope,
    server: ptc_mcp.HttpServer,
    tool: str,
    arguments: dict[str, Any],
    limits: dict[str, Any],
) -> None:
    await ptc_mcp.mount(agent, server, **limits)
    result = await call(agent, tool, arguments)
    assert result.error is None, result.error
    assert result.value == {"v": [0] * arguments["n"]}


async def test_a_compressed_response_is_refused_and_the_next_call_works(
    agent: ptc.Scope, server: ptc_mcp.HttpServer
) -> None:
    # ptc asks for Accept-Encoding: identity; what it counts is what the SDK would parse.
    await ptc_mcp.mount(agent, server)
    result = await call(agent, "compressed", {})
    assert result.error is not None and result.error.code == "TOOL_ERROR", result
    assert "the server compressed its response (gzip)" in result.error.message
    assert "Accept-Encoding: identity" in result.error.message
    await still_answers(agent)


async def test_a_message_of_too_many_values_on_the_event_stream_is_dropped_and_logged(
    agent: ptc.Scope, caplog: pytest.LogCaptureFixture
) -> None:
    # No request waits for the server's own stream (a GET): the refusal is logged, and the
    # calls go on.
    with hostile_http("--event-values", "150000") as server:
        await ptc_mcp.mount(agent, server)
        logged = await wait_for(
            lambda: [r.getMessage() for r in caplog.records if "event stream" in r.getMessage()]
        )
        expected = "a message on the server's event stream holds more JSON values than 100,000"
        assert expected in logged[0]
        assert server.url in logged[0]
        await still_answers(agent)
