"""ptc to ptc over streamable HTTP on 127.0.0.1 (an ephemeral port), in one process: one
runtime serves a scope with ``ptc.mcp.serve``, another mounts it with ``ptc.mcp.http``.
Calls, structured values, list_changed across the wire, and a server that goes away."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

import ptc
from ptc import mcp as ptc_mcp

from .conftest import wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@asynccontextmanager
async def serving(scope: ptc.Scope) -> AsyncIterator[tuple[str, anyio.CancelScope]]:
    """``serve(scope, "streamable-http", port=0)`` in a task; yields its URL and a cancel scope
    that stops it."""
    urls: list[str] = []
    ready = anyio.Event()

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    async with anyio.create_task_group() as group:

        async def run() -> None:
            with stop:
                await ptc_mcp.serve(scope, "streamable-http", port=0, ready=on_ready)

        stop = anyio.CancelScope()
        group.start_soon(run)
        with anyio.fail_after(10):
            await ready.wait()
        yield urls[0], stop
        stop.cancel()


async def test_a_ptc_scope_mounted_over_http_by_another_runtime() -> None:
    async with ptc.ToolRuntime() as host, ptc.ToolRuntime() as client:

        @host.tool(concurrency_safe=True)
        def double(n: int) -> int:
            """Double a number."""
            return 2 * n

        served = host.scope("served")
        async with serving(served) as (url, stop):
            assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
            mounted = await ptc_mcp.mount(client.root, ptc_mcp.http(url), prefix="remote_")
            assert mounted.names == ("remote_double",)
            definition = client.root.view().visible["remote_double"]
            # The wrapped outputSchema comes back as an object schema; the value is the object.
            assert definition.output.schema["properties"] == {"result": {"type": "integer"}}
            doubled = await client.root.call("remote_double", {"n": 21})
            assert doubled.value == {"result": 42}

            changes: list[ptc.Scope] = []
            client.root.on("tools/change", changes.append)

            @served.tool
            def triple(n: int) -> int:
                """Triple a number."""
                return 3 * n

            await wait_for(lambda: "remote_triple" in client.root.view().visible)
            assert changes == [client.root]
            assert (await client.root.call("remote_triple", {"n": 2})).value == {"result": 6}

            stop.cancel()  # the server goes away
            await wait_for(lambda: stop.cancelled_caught, seconds=10)
            gone = await client.root.call("remote_double", {"n": 1})
            assert gone.error is not None and gone.error.code == "TOOL_UNAVAILABLE", gone.error
            assert not mounted.connected
