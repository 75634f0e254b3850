"""``ptc serve``: serve a scope over MCP (stdio by default, or streamable HTTP).

The scope's tools are what ``MODULE:FUNC`` registers plus every mounted MCP server, so
``ptc serve --mount-stdio "mcp-server-git --repository ."`` wraps any MCP server in code
mode with no Python. Problems (bad flags, a missing module, a server that cannot be
mounted) exit with status 2 and one line on stderr; stdout belongs to the protocol.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

import anyio

from .._layers import MODES, PROFILES
from .._runtime import ToolRuntime
from ._common import CliError, call_tools_func, load_tools

__all__ = ("add_parser", "main", "parse_host_port")


def add_parser(sub: Any) -> None:
    """Add ``serve`` to the ``ptc`` subcommands (``sub`` from ``add_subparsers``)."""
    serve = sub.add_parser(
        "serve",
        help="serve a scope (your tools and mounted MCP servers) as an MCP server",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    serve.add_argument(
        "tools", nargs="?", metavar="MODULE:FUNC", help="FUNC(runtime) registers tools"
    )
    serve.add_argument("--mount-stdio", action="append", default=[], metavar='"CMD ARGS"',
                       help="mount an MCP server started with this command line (repeatable)")
    serve.add_argument("--mount-http", action="append", default=[], metavar="URL",
                       help="mount an MCP server at this streamable-HTTP URL (repeatable)")
    serve.add_argument("--mode", choices=MODES, default="code",
                       help="how the scope presents its tools (default: code)")
    serve.add_argument("--profile", choices=PROFILES, default="python", help="language profile")
    serve.add_argument("--http", metavar="HOST:PORT",
                       help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6; port 0 = any free port)."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise CliError(f"--http wants HOST:PORT (e.g. 127.0.0.1:8000), got {text!r}")
    return host, int(port)


def main(args: argparse.Namespace) -> int:
    try:
        endpoint = parse_host_port(args.http) if args.http else None
        commands = [_command(line) for line in args.mount_stdio]
        tools = load_tools(args.tools) if args.tools else None
        anyio.run(_serve, tools, commands, list(args.mount_http), args.mode, args.profile, endpoint)
    except CliError as exc:
        print(f"ptc serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _command(line: str) -> list[str]:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise CliError(f"--mount-stdio {line!r}: {exc}") from exc
    if not words:
        raise CliError("--mount-stdio needs a command line")
    return words


async def _serve(
    tools: Any,
    commands: list[list[str]],
    urls: list[str],
    mode: Any,
    profile: Any,
    endpoint: tuple[str, int] | None,
) -> None:
    from .. import mcp as ptc_mcp  # only `ptc serve` needs the MCP SDK

    async with ToolRuntime(profile=profile) as runtime:
        if tools is not None:
            await call_tools_func(tools, runtime)
        scope = runtime.scope("serve")
        scope.present_as(mode)
        servers: list[ptc_mcp.StdioServer | ptc_mcp.HttpServer] = [
            ptc_mcp.stdio(*words) for words in commands
        ]
        servers += [ptc_mcp.http(url) for url in urls]
        for server in servers:
            try:
                await ptc_mcp.mount(scope, server)
            except ptc_mcp.MountError as exc:  # its message names the server
                raise CliError(str(exc)) from exc
            except ValueError as exc:
                raise CliError(f"cannot mount {server.label!r}: {exc}") from exc
        await scope.prepare()
        listed = len(scope.model_tools())
        natives = len(scope.view().visible) - (mode != "native")
        what = f"{natives} tools in {mode} mode ({listed} listed)"
        if endpoint is None:
            _say(f"serving {what} over stdio")
            await ptc_mcp.serve(scope)
        else:
            host, port = endpoint

            def ready(url: str) -> None:
                _say(f"serving {what} over streamable HTTP at {url}")

            try:
                await ptc_mcp.serve(scope, "streamable-http", host=host, port=port, ready=ready)
            except OSError as exc:
                raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def _say(line: str) -> None:
    print(f"ptc serve: {line}", file=sys.stderr, flush=True)
