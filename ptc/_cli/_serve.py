"""``ptc serve``: serve a scope over MCP (stdio by default, or streamable HTTP).

The scope's tools are what ``MODULE:FUNC`` registers plus every mounted MCP server, so
``ptc serve --mount-stdio "mcp-server-git --repository ."`` wraps any MCP server in code
mode with no Python. Problems (bad flags, a missing module, a server that cannot be
mounted) exit with status 2 and one line on stderr; stdout belongs to the protocol.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import shlex
import signal
import sys
from dataclasses import dataclass
from typing import Any

import anyio

from worker import Containment

from .._errors import ConfigurationError, UsageError
from .._runtime import ToolRuntime
from .._scopes._layers import MODES, PROFILES
from ._common import (
    CliError,
    add_require,
    call_tools_func,
    containment,
    help_text,
    load_tools,
)

__all__ = ("add_parser", "main", "parse_host_port")


def add_parser(sub: Any) -> None:
    """Add ``serve`` to the ``ptc`` subcommands (``sub`` from ``add_subparsers``)."""
    serve = sub.add_parser(
        "serve",
        help="serve a scope (your tools and mounted MCP servers) as an MCP server",
        description=help_text(__doc__, 1),
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
    add_require(serve)
    serve.add_argument("--http", metavar="HOST:PORT",
                       help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    serve.add_argument("--token-file", metavar="FILE",
                       help="with --http: clients must send this file's token as a bearer token"
                            " (required off loopback)")
    serve.add_argument("--allow-host", action="append", default=[], metavar="HOST[:PORT]",
                       help="with --http: a Host header value clients use (repeatable;"
                            " required off loopback)")
    serve.add_argument("--no-auth", action="store_true",
                       help="with --http off loopback: serve without a token (anyone who"
                            " reaches the port can run programs)")
    serve.add_argument("--mount-timeout", type=_seconds, default=60.0, metavar="S",
                       help="each call of a mounted server times out after S seconds (default 60)")
    serve.add_argument("--max-runs", type=_count, default=None, metavar="N",
                       help="run_code runs at once (default: from the CPUs and memory);"
                            " four times as many may wait, the rest are told the server is busy")


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6; port 0 = any free port)."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise CliError(f"--http wants HOST:PORT (e.g. 127.0.0.1:8000), got {text!r}")
    return host, int(port)


@dataclass(frozen=True)
class _Plan:
    """What ``ptc serve`` was asked to do, checked before anything starts."""

    tools: Any
    commands: list[list[str]]
    urls: list[str]
    mode: Any
    profile: Any
    endpoint: tuple[str, int] | None
    token: Any  # a ptc.mcp.BearerToken, for --token-file
    allowed_hosts: list[str]
    no_auth: bool
    mount_timeout: float
    max_runs: int | None
    required: Containment | None  # --require


def main(args: argparse.Namespace) -> int:
    try:
        plan = _plan(args)
        stopped_by = anyio.run(_serve_until_signal, plan)
    except CliError as exc:
        print(f"ptc serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 128 + stopped_by if stopped_by else 0


async def _serve_until_signal(plan: _Plan) -> int | None:
    """Serve until done, or until SIGINT or SIGTERM (``docker stop``): then serving is
    cancelled, the runtime closes in order (mounted servers and workers stopped, scratch
    removed) and the signal's number is returned. A second signal during the close is
    Python's default: an immediate ``KeyboardInterrupt``.

    The signals are taken here, not left to asyncio's default Ctrl-C handling, which only
    cancels the main task natively; a cancellation anyio delivers itself cannot be lost."""
    stopped_by: list[int] = []
    failed: list[CliError] = []
    stop = anyio.CancelScope()  # around the serving only: the close is never cancelled
    async with anyio.create_task_group() as group:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    stopped_by.append(signum)
                    stop.cancel()
                    return

        group.start_soon(stop_on_signal)
        try:
            await _serve(plan, stop)
        except CliError as exc:  # one line on stderr, not an exception group
            failed.append(exc)
        finally:
            group.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return stopped_by[0] if stopped_by else None


def _plan(args: argparse.Namespace) -> _Plan:
    endpoint = parse_host_port(args.http) if args.http else None
    given = {"--token-file": args.token_file, "--allow-host": args.allow_host,
             "--no-auth": args.no_auth}  # fmt: skip
    http_only = [flag for flag, value in given.items() if value]
    token = None
    if endpoint is None and http_only:
        raise CliError(f"{', '.join(http_only)} apply to --http only")
    if args.no_auth and args.token_file:
        raise CliError("--no-auth and --token-file contradict each other")
    if endpoint is not None:
        from .. import mcp as ptc_mcp  # only serving needs the MCP SDK

        if args.token_file:
            try:
                token = ptc_mcp.BearerToken.from_file(args.token_file)
            except (ConfigurationError, UsageError) as exc:
                raise CliError(f"--token-file: {exc}") from exc
        missing = [flag for flag, given in (("--token-file FILE", token is not None),
                   ("--allow-host HOST", bool(args.allow_host))) if not given]  # fmt: skip
        if not _loopback(endpoint[0]) and not args.no_auth and missing:
            raise CliError(
                f"--http {args.http}: not a loopback address, so anyone who reaches the port"
                f" could run programs; give {' and '.join(missing)} (or --no-auth to accept that)"
            )
    return _Plan(
        tools=load_tools(args.tools) if args.tools else None,
        commands=[_command(line) for line in args.mount_stdio],
        urls=list(args.mount_http),
        mode=args.mode,
        profile=args.profile,
        endpoint=endpoint,
        token=token,
        allowed_hosts=list(args.allow_host),
        no_auth=args.no_auth,
        mount_timeout=args.mount_timeout,
        max_runs=args.max_runs,
        required=containment(args.require),
    )


def _loopback(host: str) -> bool:
    """As ``ptc.mcp.serve`` decides whether an address needs a token (checked here first,
    so a refused setting fails before any server is mounted)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"wants a positive number of seconds, got {text!r}")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"wants a whole number of at least 1, got {text!r}")
    return int(text)


def _command(line: str) -> list[str]:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise CliError(f"--mount-stdio {line!r}: {exc}") from exc
    if not words:
        raise CliError("--mount-stdio needs a command line")
    return words


async def _serve(plan: _Plan, stop: anyio.CancelScope) -> None:
    async with ToolRuntime(profile=plan.profile, containment=plan.required) as runtime:
        with stop:
            await _serve_in(runtime, plan)


async def _serve_in(runtime: ToolRuntime, plan: _Plan) -> None:
    from .. import mcp as ptc_mcp  # only `ptc serve` needs the MCP SDK

    if plan.tools is not None:
        await call_tools_func(plan.tools, runtime)
    scope = runtime.scope("serve")
    scope.present_as(plan.mode)
    servers: list[ptc_mcp.StdioServer | ptc_mcp.HttpServer] = [
        ptc_mcp.stdio(*words) for words in plan.commands
    ]
    servers += [ptc_mcp.http(url) for url in plan.urls]
    for server in servers:
        try:
            await ptc_mcp.mount(scope, server, timeout_seconds=plan.mount_timeout)
        except ptc_mcp.MountError as exc:  # its message names the server
            raise CliError(str(exc)) from exc
        except ValueError as exc:
            raise CliError(f"cannot mount {server.label!r}: {exc}") from exc
    await scope.prepare()
    listed = len(scope.model_tools())
    sessions = plan.mode != "native"  # each MCP client session gets a ptc.Session of its own
    natives = len(scope.view().visible) - (plan.mode != "native")
    what = f"{natives} tools in {plan.mode} mode ({listed} listed)"
    if plan.endpoint is None:
        _say(f"serving {what} over stdio")
        await ptc_mcp.serve(scope, max_concurrent_runs=plan.max_runs, sessions=sessions)
        return
    host, port = plan.endpoint

    def ready(url: str) -> None:
        _say(f"serving {what} over streamable HTTP at {url}")
        if plan.no_auth:
            _say(
                f"WARNING: --no-auth: anyone who reaches {url} can run programs and call"
                " every tool of this scope"
            )

    try:
        await ptc_mcp.serve(
            scope,
            "streamable-http",
            host=host,
            port=port,
            ready=ready,
            auth=plan.token,
            allowed_hosts=plan.allowed_hosts,
            insecure_no_auth=plan.no_auth,
            max_concurrent_runs=plan.max_runs,
            sessions=sessions,
        )
    except ConfigurationError as exc:  # a malformed --allow-host
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def _say(line: str) -> None:
    print(f"ptc serve: {line}", file=sys.stderr, flush=True)
