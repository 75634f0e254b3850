"""``serve``: a scope's MCP server run over stdio, or over streamable HTTP behind uvicorn.

Over HTTP, who may connect is decided before the SDK sees a request (DESIGN section 9,
"Serving over HTTP lets in only who belongs"): a bearer token or ``TokenVerifier`` and the
Host values to accept are required on any non-loopback address; a loopback address keeps a
Host/Origin check. See :mod:`ptc.mcp._http_auth` and :mod:`ptc.mcp._http_hosts`.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from typing import Literal

import anyio
import uvicorn
from mcp.server.auth.provider import TokenVerifier
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

import ptc

from ._http_auth import BearerGate, CloseOnUnreadBody, DisconnectWatch
from ._http_hosts import HostGate, HostPolicy, host_policy, is_loopback
from ._serve import server
from ._stdio_server import stdio_server_streams

__all__ = ("TRANSPORTS", "Transport", "serve")

logger = logging.getLogger("ptc.mcp")

Transport = Literal["stdio", "streamable-http"]
TRANSPORTS: tuple[Transport, ...] = ("stdio", "streamable-http")


async def serve(
    scope: ptc.Scope | ptc.Session,
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    ready: Callable[[str], object] | None = None,
    auth: TokenVerifier | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] | None = None,
    insecure_no_auth: bool = False,
    max_concurrent_runs: int | None = None,
    max_queued_runs: int | None = None,
    sessions: bool = False,
) -> None:
    """Serve ``scope`` (or a session of one) until cancelled (or, on stdio, until the
    client closes stdin).

    ``transport="streamable-http"`` listens on ``host:port`` (``port=0``: any free port)
    at path ``/mcp``; ``ready(url)`` is called once it accepts connections. ``auth`` (a
    :class:`ptc.mcp.BearerToken` or any SDK ``TokenVerifier``) is required, with the
    ``allowed_hosts`` a client may name in its ``Host`` header, on any address that is not
    loopback, unless ``insecure_no_auth=True``. An allowed host is ``name``, ``name:port``,
    ``name:*``, an IP literal (IPv6 in brackets) with the same ports; no port: any port.
    ``allowed_origins`` (``http(s)://host[:port|:*]``) defaults to ``http(s)://`` each
    allowed host. ``max_concurrent_runs`` / ``max_queued_runs``: see
    :func:`ptc.mcp.server`. Raises ``ptc.ConfigurationError`` for a setting that would let
    in anyone, or a malformed host or origin, before anything listens.
    """
    if transport not in TRANSPORTS:
        raise ptc.ConfigurationError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
    if isinstance(allowed_hosts, str) or isinstance(allowed_origins, str):
        raise ptc.UsageError("allowed_hosts and allowed_origins take a list of strings")
    served = server(
        scope,
        max_concurrent_runs=max_concurrent_runs,
        max_queued_runs=max_queued_runs,
        sessions=sessions,
    )
    if transport == "stdio":
        if auth is not None or allowed_hosts or allowed_origins or insecure_no_auth:
            raise ptc.UsageError("auth, allowed_hosts and the like apply to streamable-http")
        async with stdio_server_streams() as (read, write):
            await served.run(read, write, served.create_initialization_options())
        return
    policy = _checked_policy(host, auth, allowed_hosts, allowed_origins, insecure_no_auth)
    # The SDK's own Host/Origin check matches by string prefix; HostGate takes its place.
    unchecked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app: ASGIApp = DisconnectWatch(
        served.streamable_http_app(host=host, transport_security=unchecked)
    )
    if policy is not None:
        app = HostGate(app, policy)
    if auth is not None:
        app = BearerGate(app, auth)  # nothing inside sees an unauthenticated request
    # Outermost: whoever answers from the headers alone, the body is not read after it.
    await _run_uvicorn(CloseOnUnreadBody(app), host, port, ready)


def _checked_policy(
    host: str,
    auth: TokenVerifier | None,
    allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str] | None,
    insecure_no_auth: bool,
) -> HostPolicy | None:
    if auth is not None and not callable(getattr(auth, "verify_token", None)):
        raise ptc.UsageError("auth takes a ptc.mcp.BearerToken or an SDK TokenVerifier")
    if not is_loopback(host) and not insecure_no_auth:
        missing = [
            what
            for what, given in (
                ("auth= (a ptc.mcp.BearerToken or a TokenVerifier)", auth is not None),
                ("allowed_hosts= (the Host values clients use)", bool(allowed_hosts)),
            )
            if not given
        ]
        if missing:
            raise ptc.ConfigurationError(
                f"serving on {host!r}, which is not a loopback address, lets in anyone who"
                f" reaches the port: it needs {' and '.join(missing)}, or insecure_no_auth=True"
            )
    policy = host_policy(host, allowed_hosts, allowed_origins)
    if auth is None and not is_loopback(host):
        logger.warning(
            "serving on %s without authentication (insecure_no_auth=True): anyone who reaches"
            " the port can run programs and call every tool of the scope",
            host,
        )
    return policy


async def _run_uvicorn(
    app: ASGIApp, host: str, port: int, ready: Callable[[str], object] | None
) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        bound_port = sock.getsockname()[1]
        # A bounded graceful shutdown: open streams (a client's SSE GET) are closed after it.
        # ws="none": no WebSocket upgrade, whatever is installed; an upgrade request is
        # answered as plain HTTP, through the gates.
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3, ws="none"
        )
        runner = uvicorn.Server(config)
        stopped = anyio.Event()

        async def run() -> None:
            # Shielded: a cancelled serve() asks uvicorn to stop (below) instead of
            # cancelling it mid-request, so sessions close and the lifespan ends in order.
            with anyio.CancelScope(shield=True):
                try:
                    await runner.serve([sock])
                finally:
                    stopped.set()

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            try:
                # uvicorn exposes readiness only as a flag.
                while not runner.started and not stopped.is_set():  # noqa: ASYNC110
                    await anyio.sleep(0.01)
                if ready is not None and runner.started:
                    shown = f"[{host}]" if family == socket.AF_INET6 else host
                    ready(f"http://{shown}:{bound_port}/mcp")
                await stopped.wait()
            except anyio.get_cancelled_exc_class():
                runner.should_exit = True
                raise
    finally:
        sock.close()
