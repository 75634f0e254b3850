"""The Host and Origin a request to a served scope may name (``ptc.mcp._http_hosts``; DESIGN
section 9, "Serving over HTTP lets in only who belongs"): parsed strictly, compared whole.
The attacks go to a real server over raw sockets, where a client library would rewrite or
refuse the header."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptc
from ptc import mcp as ptc_mcp
from ptc.mcp._http_hosts import HostGate, host_policy, parse_authority, parse_origin

from .conftest import server_port, serving, status_of

pytestmark = pytest.mark.anyio

# A red-team finding: `myhost:1@evil.example` passed the SDK's `myhost:*` (a prefix match).
FOREIGN_HOSTS = [
    "myhost:1@evil.example",
    "127.0.0.1:1@evil.example",
    "localhost:1@evil.example",
    "user@myhost",
    "myhost:evil",
    "myhost:80:80",
    "myhost:",
    "myhost:99999",
    "myhost.evil.example",
    "evil.example",
    "myhost/x",
    "myhost%2e",
    "myhost.",
    "[::1]@evil.example",
    "[::1%25lo]:80",
    "127.1",
    "127.000.000.001",
    "0x7f.0.0.1",
    "my host",
    "myhöst",
    "",
]
OWN_HOSTS = ["myhost", "MyHost:8000", "myhost:1", "LOCALHOST:5", "127.0.0.1:9", "[::1]:9",
             "[0:0::1]:9", "[::1]"]  # fmt: skip


@pytest.mark.parametrize("text", FOREIGN_HOSTS)
def test_anything_but_a_host_and_a_numeric_port_is_refused(text: str) -> None:
    assert not host_policy("127.0.0.1", ["myhost"], None).allows_host(text)  # type: ignore[union-attr]


@pytest.mark.parametrize("text", OWN_HOSTS)
def test_allowed_hosts_match_whole_names_case_insensitively_and_ip_literals_as_addresses(
    text: str,
) -> None:
    assert host_policy("127.0.0.1", ["myhost"], None).allows_host(text)  # type: ignore[union-attr]


def test_a_port_in_an_allowed_value_is_compared_exactly() -> None:
    policy = host_policy("0.0.0.0", ["myhost:8000", "[fd00::1]:*", "10.0.0.5"], None)
    assert policy is not None
    assert policy.allows_host("myhost:8000") and policy.allows_host("myhost:08000")
    assert not policy.allows_host("myhost:8001") and not policy.allows_host("myhost")
    assert policy.allows_host("[fd00::1]:1") and policy.allows_host("[FD00:0::1]")
    assert policy.allows_host("10.0.0.5:7") and not policy.allows_host("10.0.0.50:7")
    assert not policy.allows_host("localhost:8000")  # loopback names only when bound there


def test_origins_default_to_the_allowed_hosts_and_compare_scheme_host_and_port() -> None:
    policy = host_policy("127.0.0.1", ["myhost:8000"], None)
    assert policy is not None
    for allowed in ("http://myhost:8000", "https://MYHOST:8000", "http://localhost:1234",
                    "http://127.0.0.1", "http://[::1]:5"):  # fmt: skip
        assert policy.allows_origin(allowed), allowed
    for refused in ("http://myhost:1@evil.example", "http://myhost:8000@evil.example",
                    "http://myhost", "http://myhost:8001", "http://myhost:8000/",
                    "ftp://myhost:8000", "null", "http://evil.example", "https://localhost:1",
                    "http://user@localhost:1", "myhost:8000", ""):  # fmt: skip
        assert not policy.allows_origin(refused), refused


def test_explicit_origins_mean_the_default_port_unless_given() -> None:
    policy = host_policy("0.0.0.0", ["myhost"], ["https://app.example", "http://ui.example:*"])
    assert policy is not None
    assert policy.allows_origin("https://app.example")
    assert policy.allows_origin("https://app.example:443")
    assert not policy.allows_origin("https://app.example:8443")
    assert not policy.allows_origin("http://app.example")
    assert policy.allows_origin("http://ui.example:3000")
    assert not policy.allows_origin("http://myhost")  # explicit origins replace the default


def test_off_loopback_without_allowed_hosts_there_is_no_check() -> None:
    assert host_policy("0.0.0.0", [], None) is None
    assert host_policy("::1", [], None) is not None


@pytest.mark.parametrize(
    ("hosts", "origins", "message"),
    [
        (["http://myhost"], None, "allowed_hosts: not a host with an optional port"),
        (["myhost:1@evil.example"], None, "allowed_hosts: not a host"),
        (["myhost:70000"], None, "allowed_hosts: not a port number"),
        (["::1"], None, "allowed_hosts: not a host"),  # IPv6 goes in brackets
        (["myhost"], ["myhost"], "allowed_origins: not an http"),
        (["myhost"], ["https://app.example/"], "allowed_origins: not an http"),
    ],
)
def test_a_malformed_allowed_value_is_refused_before_anything_listens(
    hosts: list[str], origins: list[str] | None, message: str
) -> None:
    with pytest.raises(ptc.ConfigurationError, match=re.escape(message)):
        host_policy("127.0.0.1", hosts, origins)


def test_parsed_forms() -> None:
    assert parse_authority("MyHost:80") == ("myhost", 80)
    assert parse_authority("[::1]") == (ipaddress.IPv6Address("::1"), None)
    assert parse_authority("my_service:*", pattern=True) == ("my_service", None)
    with pytest.raises(ValueError, match="not a host"):
        parse_authority("myhost:*")  # a wildcard only in an allowed value
    assert parse_origin("HTTPS://a.example") == ("https", "a.example", 443)
    for bad in ("http://a.example\n", "http://a.example/", "a.example"):
        with pytest.raises(ValueError, match="not a"):
            parse_origin(bad)


ALLOWED = re.compile(r"myhost(:[0-9]{1,5})?|127\.0\.0\.1:0*8000", re.IGNORECASE)


@given(st.text(alphabet="myhost127.0:8@[]/%\n evil_-MYHOST", max_size=30))
def test_every_host_accepted_is_an_allowed_name_with_a_port(text: str) -> None:
    policy = host_policy("0.0.0.0", ["myhost", "127.0.0.1:8000"], None)
    assert policy is not None
    if policy.allows_host(text):
        assert ALLOWED.fullmatch(text), text


async def test_the_gate_lets_no_websocket_scope_reach_the_app() -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    async def nothing() -> Any:
        raise AssertionError("the gate read a message")

    async def ignore(message: Any) -> None:
        pass

    policy = host_policy("127.0.0.1", [], None)
    assert policy is not None
    gate = HostGate(app, policy)
    await gate({"type": "websocket", "headers": [(b"host", b"localhost")]}, nothing, ignore)
    await gate({"type": "lifespan"}, nothing, ignore)
    assert reached == ["lifespan"]


# -- on a real server -------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [{}, {"host": "0.0.0.0", "auth": ptc_mcp.BearerToken("t" * 16), "allowed_hosts": ["myhost"]}],
    ids=["loopback", "off-loopback"],
)
async def test_a_server_refuses_every_foreign_host_and_origin(options: dict[str, Any]) -> None:
    token = b"authorization: Bearer " + b"t" * 16
    async with ptc.ToolRuntime() as runtime, serving(runtime.root, **options) as url:
        port = server_port(url)
        for host in FOREIGN_HOSTS:
            assert await status_of(port, b"host: " + host.encode(), token) in (400, 421), host
        own = b"host: myhost:%d" % port if options else b"host: 127.0.0.1:%d" % port
        assert await status_of(port, own, token) == 200
        for origin in (b"http://myhost:1@evil.example", b"http://evil.example", b"null"):
            assert await status_of(port, own, b"origin: " + origin, token) == 403, origin
        # The header twice, or HTTP/1.0 without one, is no host at all.
        assert await status_of(port, own, own, token) in (400, 421)
        assert await status_of(port, own, b"origin: http://evil.example",
                               b"origin: http://evil.example", token) in (400, 403)  # fmt: skip


async def test_loopback_names_are_accepted_in_any_case_and_form() -> None:
    async with ptc.ToolRuntime() as runtime, serving(runtime.root) as url:
        port = server_port(url)
        for host in (b"LocalHost:%d" % port, b"127.0.0.1", b"[::1]:%d" % port):
            assert await status_of(port, b"host: " + host) == 200, host
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(b"GET /mcp HTTP/1.0\r\n\r\n")  # no Host header
            with anyio.fail_after(10):
                assert (await stream.receive()).startswith(b"HTTP/1.1 421 ")
