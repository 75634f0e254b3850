"""Where an MCP server is: started over stdio, or reached over streamable HTTP, and the
SDK transport that connects to each."""

from __future__ import annotations

import shlex
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from mcp import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

# The SDK's own HTTP client factory (its timeouts suit long SSE streams); it is not
# re-exported from a public module, so it is imported from where it is defined.
from mcp.shared._httpx_utils import create_mcp_http_client

import ptc

__all__ = ("HttpServer", "MountError", "StdioServer", "http", "stdio", "transport")


class MountError(ptc.PtcError, ConnectionError):
    """The MCP server could not be started, reached or listed (the message says which
    server and why). Bad schemas and name clashes are ``ValueError`` s instead."""


@dataclass(frozen=True, slots=True)
class StdioServer:
    """An MCP server started as a subprocess and spoken to over its stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    """Extra environment variables (over the SDK's safe default set: PATH, HOME, ...)."""
    cwd: str | None = None
    stderr: TextIO | None = None
    """Where the server's stderr goes (a real file; default: this process's stderr)."""

    @property
    def label(self) -> str:
        return shlex.join([self.command, *self.args])


@dataclass(frozen=True, slots=True)
class HttpServer:
    """An MCP server reached over streamable HTTP."""

    url: str
    headers: Mapping[str, str] | None = field(default=None)

    @property
    def label(self) -> str:
        return self.url


def stdio(
    command: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stderr: TextIO | None = None,
) -> StdioServer:
    """``stdio("mcp-server-git", "--repository", path)``: a server to start over stdio."""
    if not isinstance(command, str) or not command:
        raise ptc.UsageError("stdio() needs the server's command")
    if not all(isinstance(a, str) for a in args):
        raise ptc.UsageError("stdio() arguments must be strings")
    return StdioServer(command, tuple(args), env, cwd, stderr)


def http(url: str, *, headers: Mapping[str, str] | None = None) -> HttpServer:
    """``http("http://127.0.0.1:8000/mcp")``: a server to reach over streamable HTTP."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ptc.UsageError(f"http() needs an http:// or https:// URL, got {url!r}")
    return HttpServer(url, headers)


def transport(server: StdioServer | HttpServer) -> AbstractAsyncContextManager[tuple[Any, Any]]:
    """The SDK transport for ``server``: ``(read, write)`` streams for a ``ClientSession``."""
    if isinstance(server, StdioServer):
        params = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=dict(server.env) if server.env is not None else None,
            cwd=server.cwd,
        )
        return stdio_client(params, errlog=server.stderr or sys.stderr)
    return _http_transport(server)


@asynccontextmanager
async def _http_transport(server: HttpServer) -> AsyncIterator[tuple[Any, Any]]:
    client = create_mcp_http_client(headers=dict(server.headers) if server.headers else None)
    async with client, streamable_http_client(server.url, http_client=client) as streams:
        yield streams
