"""Fixtures of the ptc.mcp tests: the toy server (built with the official SDK) and helpers."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc
from ptc import mcp as ptc_mcp

TOY = Path(__file__).with_name("toy_server.py")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}
"""An ``initialize`` request, as a client sends it first."""


def toy(marker: Path, *flags: str) -> ptc_mcp.StdioServer:
    return ptc_mcp.stdio(sys.executable, str(TOY), "--marker", str(marker), *flags)


async def wait_for(predicate: Callable[[], Any], *, seconds: float = 10) -> Any:
    """Poll ``predicate`` until it is truthy (the thing waited for happens in another process)."""
    with anyio.fail_after(seconds):
        while not (value := predicate()):  # noqa: ASYNC110 - no event crosses processes
            await anyio.sleep(0.02)
    return value


def marker_text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


@pytest.fixture
async def runtime() -> AsyncIterator[ptc.ToolRuntime]:
    async with ptc.ToolRuntime() as rt:
        yield rt


@asynccontextmanager
async def serving(scope: ptc.Scope, **options: Any) -> AsyncIterator[str]:
    """``serve(scope, "streamable-http", port=0, **options)`` in a task; yields a URL on
    127.0.0.1 (the server may listen on 0.0.0.0)."""
    urls: list[str] = []
    ready = anyio.Event()

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    async with anyio.create_task_group() as group:
        options.setdefault("host", "127.0.0.1")
        group.start_soon(
            lambda: ptc_mcp.serve(scope, "streamable-http", port=0, ready=on_ready, **options)
        )
        with anyio.fail_after(20):
            await ready.wait()
        port = urls[0].rsplit(":", 1)[1].split("/")[0]
        yield f"http://127.0.0.1:{port}/mcp"
        group.cancel_scope.cancel()


def server_port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def request_head(*headers: bytes, length: int, method: bytes = b"POST") -> bytes:
    """A request for /mcp with exactly these header lines (raw bytes: nothing rewrites
    them), a JSON body of ``length`` bytes and the ``Accept`` streamable HTTP wants."""
    lines = [
        method + b" /mcp HTTP/1.1",
        *headers,
        b"content-type: application/json",
        b"accept: application/json, text/event-stream",
        b"content-length: %d" % length,
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def status_of(port: int, *headers: bytes) -> int:
    """The status an ``initialize`` POST to 127.0.0.1:``port`` with these header lines gets."""
    body = json.dumps(INITIALIZE).encode()
    with anyio.fail_after(10):
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(request_head(*headers, length=len(body)) + body)
            response = b""
            while b"\r\n" not in response:
                response += await stream.receive()
    return int(response.split(b" ", 2)[1])
