"""The Host and Origin a request to a scope served over HTTP may name (DESIGN section 9,
"Serving over HTTP lets in only who belongs").

A web page can make a browser send requests to a server on this machine or its network (DNS
rebinding, cross-site requests); what the page cannot choose is the ``Host`` and ``Origin``
the browser sends. :class:`HostGate` parses both strictly -- a host name or an IP literal
(IPv6 in brackets) and an optional numeric port, nothing else: userinfo (``a@b``), paths,
spaces, ``%`` and non-ASCII are refused -- and compares host and port exactly with the allowed
values: names case-insensitively, IP literals as addresses, a port only where the allowed
value leaves it open (``myhost`` or ``myhost:*``: any port; ``myhost:8000``: that one).

It takes the place of the SDK's ``TransportSecuritySettings`` check, which matches by string
prefix: ``myhost:1@evil.example`` passes its ``myhost:*`` (docs/deviations.md).
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send

import ptc

__all__ = (
    "HostGate",
    "HostPolicy",
    "host_policy",
    "is_loopback",
    "parse_authority",
    "parse_origin",
)

logger = logging.getLogger("ptc.mcp")

Host = str | ipaddress.IPv4Address | ipaddress.IPv6Address
"""A host name (lowercase) or an IP address."""

_LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "::1")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_LABEL: Final = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
# re.ASCII: no Unicode digits or letters; fullmatch: no trailing newline slips through.
_AUTHORITY: Final = re.compile(
    rf"(?:\[(?P<ipv6>[0-9a-f:.]+)\]|(?P<name>{_LABEL}(?:\.{_LABEL})*))"
    r"(?::(?P<port>[0-9]{1,5}|\*))?",
    re.ASCII | re.IGNORECASE,
)
_ORIGIN: Final = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#]*)", re.ASCII | re.I)
_ANY: Final = "*"
_T = TypeVar("_T")
_EXAMPLES: Final = {
    "allowed_hosts": "myhost, myhost:8000, [::1]:*",
    "allowed_origins": "https://app.example, http://myhost:8000, http://myhost:*",
}


def is_loopback(host: str) -> bool:
    """Whether a server bound to ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_authority(text: str, *, pattern: bool = False) -> tuple[Host, int | None]:
    """``host[:port]`` as ``(host, port)``: a name lowercased, an IP literal as an address,
    ``None`` for no port (in a ``pattern``: any port, as is ``:*``). Anything else raises
    ``ValueError``."""
    match = _AUTHORITY.fullmatch(text)
    if match is None or (match["port"] == _ANY and not pattern):
        raise ValueError(f"not a host with an optional port: {text!r}")
    host: Host
    if match["ipv6"] is not None:
        host = ipaddress.IPv6Address(match["ipv6"])  # raises ValueError
    elif re.fullmatch(r"[0-9.]+", match["name"]):
        host = ipaddress.IPv4Address(match["name"])  # no "127.1", no leading zeros
    else:
        host = match["name"].lower()
    port = match["port"]
    if port is None or port == _ANY:
        return host, None
    if int(port) > 65535:
        raise ValueError(f"not a port number: {port!r}")
    return host, int(port)


def parse_origin(text: str, *, pattern: bool = False) -> tuple[str, Host, int | None]:
    """``http(s)://host[:port]`` as ``(scheme, host, port)``; no port is the scheme's
    default (in a ``pattern``, ``:*`` is any port: ``None``). Raises ``ValueError``."""
    match = _ORIGIN.fullmatch(text)
    if match is None:
        raise ValueError(f"not an http(s) origin: {text!r}")
    scheme = match["scheme"].lower()
    authority = match["authority"]
    host, port = parse_authority(authority, pattern=pattern)
    if port is None and not authority.endswith(":*"):
        port = _DEFAULT_PORTS[scheme]
    return scheme, host, port


@dataclass(frozen=True)
class HostPolicy:
    """The ``Host`` and ``Origin`` values a served scope accepts; a port of ``None`` in a
    pattern is any port."""

    hosts: frozenset[tuple[Host, int | None]]
    origins: frozenset[tuple[str, Host, int | None]]

    def allows_host(self, value: str) -> bool:
        try:
            host, port = parse_authority(value)
        except ValueError:
            return False
        return (host, None) in self.hosts or (port is not None and (host, port) in self.hosts)

    def allows_origin(self, value: str) -> bool:
        try:
            scheme, host, port = parse_origin(value)
        except ValueError:
            return False
        return (scheme, host, None) in self.origins or (scheme, host, port) in self.origins


def host_policy(
    bound: str, allowed_hosts: Sequence[str], allowed_origins: Sequence[str] | None
) -> HostPolicy | None:
    """What a server bound to ``bound`` accepts: on loopback, the loopback names and the
    bound address on any port, plus ``allowed_hosts``; elsewhere ``allowed_hosts`` (none:
    ``None``, no check, which ``serve`` allows only with ``insecure_no_auth``).
    ``allowed_origins`` defaults to ``http(s)://`` each allowed host (``http://`` for the
    loopback names). A malformed value raises ``ptc.ConfigurationError``."""
    hosts = [_allowed(value, "allowed_hosts", parse_authority) for value in allowed_hosts]
    loopback: list[tuple[Host, int | None]] = []
    if is_loopback(bound):
        loopback = [parse_authority(_bracketed(name)) for name in (*_LOOPBACK_NAMES, bound)]
    elif not hosts:
        return None
    if allowed_origins is None:
        origins = [("http", h, p) for h, p in loopback]
        origins += [(scheme, h, p) for h, p in hosts for scheme in _DEFAULT_PORTS]
    else:
        origins = [_allowed(value, "allowed_origins", parse_origin) for value in allowed_origins]
    return HostPolicy(hosts=frozenset([*loopback, *hosts]), origins=frozenset(origins))


def _allowed(value: str, what: str, parse: Callable[..., _T]) -> _T:
    """``value`` of the setting ``what`` parsed as a pattern, or a ``ConfigurationError``."""
    if not isinstance(value, str):
        raise ptc.UsageError(f"{what} takes strings, got {value!r}")
    try:
        return parse(value, pattern=True)
    except ValueError as exc:
        raise ptc.ConfigurationError(f"{what}: {exc} (e.g. {_EXAMPLES[what]})") from exc


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class HostGate:
    """ASGI middleware: an HTTP request whose ``Host`` ``policy`` refuses is answered 421,
    one from a page whose ``Origin`` it refuses 403 (a request without ``Origin`` is not
    from a browser page); either header given twice is refused. Scopes other than HTTP and
    the lifespan (a WebSocket) never reach the app."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self._app = app
        self._policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # the server refuses a WebSocket its app did not accept
        hosts = _values(scope, b"host")
        origins = _values(scope, b"origin")
        if len(hosts) != 1 or not self._policy.allows_host(hosts[0]):
            await _refuse(send, 421, "Invalid Host header", hosts)
        elif len(origins) > 1 or not all(map(self._policy.allows_origin, origins)):
            await _refuse(send, 403, "Invalid Origin header", origins)
        else:
            await self._app(scope, receive, send)


def _values(scope: Scope, name: bytes) -> list[str]:
    headers: Iterable[tuple[bytes, bytes]] = scope.get("headers", [])
    return [value.decode("latin-1") for key, value in headers if key.lower() == name]


async def _refuse(send: Send, status: int, text: str, values: list[str]) -> None:
    logger.warning("refused an HTTP request: %s %.200r", text.lower(), values)
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
