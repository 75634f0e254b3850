"""The serve-side probes of benchmarks/mcp_hostile_bench.py: many runs asked for at once, an
HTTP client that disconnects mid-run, Ctrl-C on a stdio server whose client keeps stdin
open. Loopback and local subprocesses only."""

from __future__ import annotations

import inspect
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.shared.memory import create_client_server_memory_streams

import ptc
from ptc import mcp as ptc_mcp

Probe = Callable[[ptc.ToolRuntime, dict[str, Any]], Awaitable[None]]
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "1"}}}  # fmt: skip
ACCEPT = {"accept": "application/json, text/event-stream"}


def many_runs(count: int, mib: int) -> Probe:
    """``count`` run_code calls at once over one in-memory session, each program holding
    ``mib`` MiB for a moment: how many ran, waited, were refused or failed, and the most
    that ran at once."""

    async def body(runtime: ptc.ToolRuntime, row: dict[str, Any]) -> None:
        scope = runtime.scope("agent")
        scope.present_as("code")
        live = {"now": 0, "peak": 0}

        async def counted(execution: Any, call_next: Any) -> ptc.ToolResult:
            if execution.name == "run_code":
                live["now"] += 1
                live["peak"] = max(live["peak"], live["now"])
            try:
                result: ptc.ToolResult = await call_next()
                return result
            finally:
                if execution.name == "run_code":
                    live["now"] -= 1

        runtime.on("tools/execute", counted)
        served = ptc_mcp.server(scope)
        if "max_concurrent_runs" in inspect.signature(ptc_mcp.server).parameters:
            row["admission"] = "default"
        program = f"held = bytearray({mib} << 20)\nimport time\ntime.sleep(0.2)\nreturn len(held)"
        outcomes: dict[str, int] = {}
        started_at = time.perf_counter()
        async with create_client_server_memory_streams() as (client, server_streams):
            async with anyio.create_task_group() as group:
                options = served.create_initialization_options()
                group.start_soon(served.run, *server_streams, options)
                async with ClientSession(*client) as session, anyio.create_task_group() as calls:
                    await session.initialize()

                    async def one() -> None:
                        result = await session.call_tool("run_code", {"code": program})
                        meta = (result.meta or {}).get("ptc/error") or {}
                        text = str(meta.get("message", ""))
                        key = "ok" if not result.is_error else (
                            "busy" if "busy" in text else f"{meta.get('code')}: {text[:90]}")
                        outcomes[key] = outcomes.get(key, 0) + 1

                    for _ in range(count):
                        calls.start_soon(one)
                group.cancel_scope.cancel()
        row["call_s"] = round(time.perf_counter() - started_at, 2)
        row["outcome"] = ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()))
        row["peak_runs_at_once"] = live["peak"]
        row["peak_run_memory_mib"] = live["peak"] * mib

    return body


def http_disconnect() -> Probe:
    """A run_code call over HTTP whose client drops the connection after the first tool
    call: how the run ended, and how many tool calls it made after the drop."""

    async def body(runtime: ptc.ToolRuntime, row: dict[str, Any]) -> None:
        ticks = {"n": 0, "at_drop": 0}
        first = anyio.Event()
        ended: list[ptc.ToolResult] = []

        @runtime.tool
        def tick() -> int:
            """One step."""
            ticks["n"] += 1
            first.set()
            return 1

        runtime.on("tools/result", lambda r: ended.append(r) if r.name == "run_code" else None)
        scope = runtime.scope("agent")
        scope.present_as("code")
        urls: list[str] = []
        ready = anyio.Event()

        def listening(url: str) -> None:
            urls.append(url)
            ready.set()

        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: ptc_mcp.serve(scope, "streamable-http", port=0, ready=listening)
            )
            await ready.wait()
            url = urls[0]
            async with httpx2.AsyncClient(timeout=30) as http:
                init = await http.post(url, json=INITIALIZE, headers=ACCEPT)
                headers = {"mcp-session-id": init.headers["mcp-session-id"],
                           "mcp-protocol-version": "2025-11-25", **ACCEPT}  # fmt: skip
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await http.post(url, json=note, headers=headers)
                program = "import time\nfor i in range(400):\n    tools.tick()\n    time.sleep(.02)"
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "run_code", "arguments": {"code": program}}}  # fmt: skip
                async with http.stream("POST", url, json=call, headers=headers):
                    await first.wait()
                dropped = time.perf_counter()
                ticks["at_drop"] = ticks["n"]
            with anyio.move_on_after(60):
                while not ended:  # noqa: ASYNC110 - a benchmark polls
                    await anyio.sleep(0.01)
            row["call_s"] = round(time.perf_counter() - dropped, 2)
            error = ended[0].error if ended else None
            row["outcome"] = "no end within 60 s" if not ended else (
                error.code if error else "ok (ran to the end)")  # fmt: skip
            row["tool_calls_after_drop"] = ticks["n"] - ticks["at_drop"]
            group.cancel_scope.cancel()

    return body


def stdio_ctrl_c() -> Probe:
    """``ptc serve`` over stdio, its stdin held open, sent SIGINT: how long it takes to exit."""

    async def body(runtime: ptc.ToolRuntime, row: dict[str, Any]) -> None:
        process = subprocess.Popen(  # noqa: ASYNC220 - waited on in threads below
            [sys.executable, "-m", "ptc", "serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert process.stderr is not None
        await anyio.to_thread.run_sync(process.stderr.readline)  # serving ...
        sent = time.perf_counter()
        process.send_signal(signal.SIGINT)
        try:
            status = await anyio.to_thread.run_sync(lambda: process.wait(20))
            row["call_s"] = round(time.perf_counter() - sent, 2)
            row["outcome"] = f"exited, status {status}"
        except subprocess.TimeoutExpired:
            row["outcome"] = "still running 20 s after SIGINT (killed)"
            process.kill()
            process.wait()
        finally:
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()

    return body
