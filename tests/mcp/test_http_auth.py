"""Who may reach a scope served over HTTP (``ptc.mcp._http_auth``; DESIGN section 9, "Serving
over HTTP lets in only who belongs"): a request without a valid token is answered 401 from
its headers and its connection closed, so its body is never read; an authenticated body stays
bounded by the SDK; the token is ASCII, compared whole and never shown. Real uvicorn servers on
loopback, driven over raw sockets (a client library would send the body before reading)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream

import ptc
from ptc import mcp as ptc_mcp
from ptc.mcp._http_auth import BearerGate

from .conftest import request_head, server_port, serving, status_of

pytestmark = pytest.mark.anyio

TOKEN = "a-test-token-0123456789abcdef"
BEARER = b"authorization: Bearer " + TOKEN.encode()
GIB = 1 << 30
CHUNK = b"x" * 65536


async def until_closed(stream: SocketStream) -> bytes:
    """Everything the server sends until it ends the connection (a timeout if it never does)."""
    received = b""
    with anyio.fail_after(10):
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return received


async def trickle(stream: SocketStream, sent: list[bytes], piece: bytes, pause: float) -> None:
    """Send ``piece`` after ``piece`` (each recorded in ``sent``) until the server ends the
    connection."""
    try:
        while True:
            await stream.send(piece)
            sent.append(piece)
            await anyio.sleep(pause)
    except (anyio.BrokenResourceError, OSError):
        return


@pytest.fixture
async def port() -> Any:
    """A served scope on 127.0.0.1 that wants ``TOKEN``."""
    async with ptc.ToolRuntime() as runtime:
        async with serving(runtime.root, auth=ptc_mcp.BearerToken(TOKEN)) as url:
            yield server_port(url)


@pytest.mark.parametrize(
    "credentials",
    [
        (),
        (b"authorization: Bearer wrong-token-0123456789",),
        (b"authorization: Basic " + TOKEN.encode(),),
        (b"authorization: Bearer",),
        (BEARER, b"authorization: Bearer wrong-token-0123456789"),  # which one counts?
        (BEARER + b"x",),
    ],
    ids=["none", "wrong", "basic", "empty", "twice", "longer"],
)
async def test_without_a_valid_token_a_1_gib_request_gets_401_before_any_body_byte(
    port: int, credentials: tuple[bytes, ...]
) -> None:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(request_head(b"host: 127.0.0.1", *credentials, length=GIB))
        response = await until_closed(stream)  # the client has sent the headers only
    head = response.lower()
    assert head.startswith(b"http/1.1 401 "), response
    assert b'www-authenticate: bearer error="invalid_token"' in head
    assert b"\r\nconnection: close\r\n" in head


async def test_a_slowly_written_body_is_not_read_once_the_401_is_sent(port: int) -> None:
    sent: list[bytes] = []
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(request_head(b"host: 127.0.0.1", length=GIB))
        with anyio.fail_after(20):  # the writer ends only when the server takes no more
            async with anyio.create_task_group() as group:
                group.start_soon(trickle, stream, sent, CHUNK, 0.02)
                response = await until_closed(stream)
                answered = len(sent)
    assert response.startswith(b"HTTP/1.1 401 ")
    # Once the server answered, it closed: at most a piece in flight went to its kernel.
    assert len(sent) - answered <= 2, (answered, len(sent))
    assert len(sent) * len(CHUNK) < GIB // 64


async def test_an_authenticated_body_over_the_sdks_4_mib_is_refused_from_its_length(
    port: int,
) -> None:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(request_head(b"host: 127.0.0.1", BEARER, length=GIB))
        response = await until_closed(stream)
    assert response.startswith(b"HTTP/1.1 413 "), response
    assert b"\r\nconnection: close\r\n" in response.lower()


async def test_an_authenticated_chunked_body_is_cut_off_near_the_sdks_4_mib(port: int) -> None:
    head = request_head(b"host: 127.0.0.1", BEARER, length=0)
    head = head.replace(b"content-length: 0", b"transfer-encoding: chunked")
    sent: list[bytes] = []
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(head)
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(trickle, stream, sent, b"10000\r\n" + CHUNK + b"\r\n", 0)
                response = await until_closed(stream)
    assert response.startswith(b"HTTP/1.1 413 "), response
    # 4 MiB read by the SDK, the rest in socket buffers; never the gigabyte.
    assert 4 << 20 <= len(sent) * len(CHUNK) < 64 << 20, len(sent)


async def test_an_authenticated_request_read_to_its_end_keeps_its_connection(port: int) -> None:
    assert await status_of(port, b"host: 127.0.0.1", BEARER) == 200
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(request_head(b"host: 127.0.0.1", BEARER, length=2) + b"{}")
        with anyio.fail_after(10):
            response = await stream.receive()
    assert b"\r\nconnection: close\r\n" not in response.lower()


async def test_a_websocket_upgrade_is_plain_http_behind_the_gate(port: int) -> None:
    upgrade = (b"connection: Upgrade", b"upgrade: websocket", b"sec-websocket-version: 13",
               b"sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==", b"host: 127.0.0.1")  # fmt: skip
    assert await status_of(port, *upgrade) == 401
    assert await status_of(port, *upgrade, BEARER) != 101


async def test_the_gate_lets_no_websocket_scope_reach_the_app() -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    async def nothing() -> Any:
        raise AssertionError("the gate read a message")

    async def ignore(message: Any) -> None:
        pass

    gate = BearerGate(app, ptc_mcp.BearerToken(TOKEN))
    headers = [(b"authorization", BEARER.split(b": ", 1)[1])]
    await gate({"type": "websocket", "headers": headers}, nothing, ignore)
    await gate({"type": "lifespan"}, nothing, ignore)
    assert reached == ["lifespan"]


def test_a_bearer_token_is_long_ascii_read_from_a_file_and_never_shown(tmp_path: Path) -> None:
    for weak in ("", "short", "has spaces in it, sixteen+", "ключ-0123456789abcdef"):
        with pytest.raises(ptc.ConfigurationError, match="at least 16 printable ASCII"):
            ptc_mcp.BearerToken(weak)
    (tmp_path / "token").write_text(f"  {TOKEN}\n")
    token = ptc_mcp.BearerToken.from_file(tmp_path / "token")
    assert TOKEN not in repr(token)
    assert anyio.run(token.verify_token, TOKEN) is not None
    assert anyio.run(token.verify_token, TOKEN + "x") is None
    assert anyio.run(token.verify_token, TOKEN[:-1]) is None
    with pytest.raises(ptc.ConfigurationError, match="cannot read the token file"):
        ptc_mcp.BearerToken.from_file(tmp_path / "missing")
    (tmp_path / "binary").write_bytes(b"0123456789abcdef\xf3\xa7")  # a binary secret
    with pytest.raises(ptc.ConfigurationError, match="not UTF-8 text") as refused:
        ptc_mcp.BearerToken.from_file(tmp_path / "binary")
    shown = f"{refused.value} {refused.value.__cause__} {refused.value.__context__}"
    assert "0xf3" not in shown and "position" not in shown
