"""``ptc serve`` as a subprocess, driven by the official MCP client: over stdio wrapping the
real ``mcp-server-time`` and the toy server, over streamable HTTP on 127.0.0.1 (an ephemeral
port) with list_changed travelling toy server -> ptc -> client; ``--require`` where
containment is short (``tests/environments``); and its usage errors."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client

from tests.environments import Harness
from tests.security._support import scratch_dirs

from .conftest import TOY, wait_for

HOSTILE = Path(__file__).with_name("hostile_server.py")

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TIME = shlex.join([sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"])
TOOLS = '''
def register(runtime):
    @runtime.tool
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()
'''
CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


def toy_line(marker: Path) -> str:
    return shlex.join([sys.executable, str(TOY), "--marker", str(marker)])


def ptc_serve(*args: str) -> StdioServerParameters:
    # The SDK passes a safe subset of the environment; the child needs its own venv's ptc.
    return StdioServerParameters(command=sys.executable, args=["-m", "ptc", "serve", *args])


async def test_serve_over_stdio_wraps_real_servers(tmp_path: Path) -> None:
    params = ptc_serve("--mount-stdio", TIME, "--mount-stdio", toy_line(tmp_path), "--mode", "both")
    with (tmp_path / "stderr").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as streams,
            ClientSession(*streams) as session,
        ):
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            assert names[-1] == "run_code"
            assert {"convert_time", "get_current_time", "picture", "echo"} <= set(names)
            native = await session.call_tool("convert_time", CONVERT)
            assert not native.is_error and native.structured_content is not None
            assert native.structured_content["target"]["timezone"] == "Asia/Tokyo"
            program = f"return tools.convert_time(**{CONVERT!r})"
            ran = await session.call_tool("run_code", {"code": program})
            assert ran.structured_content == {"result": native.structured_content, "stdout": ""}
            assert ran.meta is not None and ran.meta["ptc/run"]["stats"]["calls"] == 1
            # The toy server's image reaches this client through ptc as it was.
            picture = await session.call_tool("picture", {})
            assert [c.type for c in picture.content] == ["text", "image"]
    assert "ptc serve: serving" in (tmp_path / "stderr").read_text()


async def first_line(stream: Any) -> str:
    line = b""
    with anyio.fail_after(60):
        while b"\n" not in line:
            line += await stream.receive()
    return line.decode()


def processes_mentioning(text: str) -> list[int]:
    """Pids of the live processes whose command line contains ``text`` (read-only)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().decode():
                found.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile
    return found


async def stop(process: anyio.abc.Process, signum: signal.Signals = signal.SIGINT) -> int:
    process.send_signal(signum)
    with anyio.fail_after(30):
        status = await process.wait()
    await process.aclose()
    return status


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C; docker stop
async def test_a_signal_stops_a_stdio_server_whose_client_keeps_stdin_open(
    tmp_path: Path, signum: signal.Signals
) -> None:
    command = [sys.executable, "-m", "ptc", "serve", "--mount-stdio", toy_line(tmp_path)]
    process = await anyio.open_process(command, cwd=tmp_path)  # stdin: a pipe, left open
    assert process.stderr is not None
    assert "over stdio" in await first_line(process.stderr)
    assert processes_mentioning(str(tmp_path))  # the mounted toy server
    assert await stop(process, signum) == 128 + signum
    assert processes_mentioning(str(tmp_path)) == []  # stopped with it


async def test_serve_off_loopback_with_a_token_file(tmp_path: Path) -> None:
    token = "cli-test-token-0123456789abcdef"
    (tmp_path / "token").write_text(token + "\n")
    command = [sys.executable, "-m", "ptc", "serve", "--mount-stdio", toy_line(tmp_path), "--http",
               "0.0.0.0:0", "--token-file", "token", "--allow-host", "127.0.0.1"]  # fmt: skip
    process = await anyio.open_process(command, cwd=tmp_path, stdin=subprocess.DEVNULL)
    try:
        assert process.stderr is not None
        line = await first_line(process.stderr)
        assert "over streamable HTTP at http://0.0.0.0:" in line, line
        url = "http://127.0.0.1:" + line.rsplit(":", 1)[1].strip()
        headers = {"authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            streamable_http_client(url, http_client=http) as streams,
            ClientSession(*streams) as session,
        ):
            await session.initialize()
            assert [t.name for t in (await session.list_tools()).tools] == ["run_code"]
        async with httpx2.AsyncClient() as http:
            anonymous = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert anonymous.status_code == 401
    finally:
        await stop(process)


async def test_no_auth_says_so_on_start_and_mount_timeout_bounds_calls(tmp_path: Path) -> None:
    hostile = shlex.join([sys.executable, str(HOSTILE)])
    command = [sys.executable, "-m", "ptc", "serve", "--mount-stdio", hostile, "--mode", "native",
               "--http", "0.0.0.0:0", "--no-auth", "--mount-timeout", "1"]  # fmt: skip
    process = await anyio.open_process(command, cwd=tmp_path, stdin=subprocess.DEVNULL)
    try:
        assert process.stderr is not None
        lines = ""
        while "WARNING: --no-auth" not in lines:
            lines += await first_line(process.stderr)
        serving = next(line for line in lines.splitlines() if "over streamable HTTP" in line)
        assert any(
            line.startswith("ptc serve: WARNING: --no-auth: anyone who reaches http://0.0.0.0:")
            for line in lines.splitlines()
        ), lines
        url = "http://127.0.0.1:" + serving.rsplit(":", 1)[1].strip()
        async with streamable_http_client(url) as streams, ClientSession(*streams) as session:
            await session.initialize()
            with anyio.fail_after(30):
                never = await session.call_tool("never", {})
            assert never.is_error and never.meta is not None
            assert never.meta["ptc/error"]["code"] == "TIMEOUT"
    finally:
        await stop(process)


async def test_serve_over_streamable_http_follows_list_changed(tmp_path: Path) -> None:
    # The server's own temp root: only its workers' scratch dirs are counted there, never
    # those of other ptc hosts sharing the machine's /tmp.
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(scratch_root, 0o755)
    (tmp_path / "served_tools.py").write_text(TOOLS)
    command = [sys.executable, "-m", "ptc", "serve", "served_tools:register", "--mode", "both",
               "--mount-stdio", toy_line(tmp_path), "--http", "127.0.0.1:0"]  # fmt: skip
    process = await anyio.open_process(
        command,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(scratch_root)},
    )
    heard: list[IncomingMessage] = []

    async def on_message(message: IncomingMessage) -> None:
        heard.append(message)

    try:
        assert process.stderr is not None
        with anyio.fail_after(30):
            line = b""
            while b"\n" not in line:
                line += await process.stderr.receive()
        text = line.decode()
        assert "over streamable HTTP at http://127.0.0.1:" in text, text
        url = text.split(" at ", 1)[1].split()[0]
        async with (
            streamable_http_client(url) as streams,
            ClientSession(*streams, message_handler=on_message) as session,
        ):
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            assert "shout" in names and "echo" in names and "extra" not in names
            shouted = await session.call_tool("run_code", {"code": "return tools.shout(text='hi')"})
            assert shouted.structured_content == {"result": "HI", "stdout": ""}
            assert scratch_dirs(str(scratch_root))  # its pool's children: TMPDIR took
            # The toy server grows a tool; ptc re-registers it and tells this client.
            assert not (await session.call_tool("grow", {})).is_error

            def told() -> bool:
                return any(isinstance(m, types.ToolListChangedNotification) for m in heard)

            await wait_for(told)
            names = [t.name for t in (await session.list_tools()).tools]
            assert "extra" in names
            extra = await session.call_tool("extra", {})
            assert extra.content[0].text == "extra!"  # type: ignore[union-attr]
    finally:
        process.send_signal(signal.SIGINT)
        with anyio.fail_after(15):
            status = await process.wait()
        await process.aclose()
    assert status == 130
    assert scratch_dirs(str(scratch_root)) == set()  # its workers' scratch went with them


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mount-stdio", "ptc-no-such-command-x"], "command not found: ptc-no-such-command-x"),
        (
            ["--mount-http", "http://127.0.0.1:9/mcp"],
            "MCP server 'http://127.0.0.1:9/mcp': Connect",
        ),
        (["--http", "localhost"], "--http wants HOST:PORT"),
        (["no_such_module:register"], "cannot import 'no_such_module'"),
        (["--mode", "sideways"], "invalid choice: 'sideways'"),
        (["--mount-stdio", "'unclosed"], "No closing quotation"),
        # Off loopback: a token and the Host values, or an explicit --no-auth.
        (["--http", "0.0.0.0:0"], "give --token-file FILE and --allow-host HOST (or --no-auth"),
        (["--http", "0.0.0.0:0", "--allow-host", "h"], "not a loopback address"),
        (["--http", "0.0.0.0:0", "--token-file", "nope"], "--token-file: cannot read the token"),
        (["--http", "127.0.0.1:0", "--allow-host", "http://h"], "allowed_hosts: not a host"),
        (["--token-file", "t", "--no-auth"], "--token-file, --no-auth apply to --http only"),
        (["--http", "127.0.0.1:0", "--no-auth", "--token-file", "t"], "contradict each other"),
        (["--mount-timeout", "0"], "positive number of seconds"),
        (["--max-runs", "none"], "whole number of at least 1"),
        (["--require", "memory,ram"], "--require wants dimensions from filesystem,"),
    ],
)
def test_usage_problems_are_one_line_and_status_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ptc", "serve", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ},
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and message in done.stderr, done.stderr
    assert done.stdout == ""


# A host in E4-old (Landlock refused: filesystem cannot be full) serves code mode with and
# without `--require none`, and a client runs a program through each.
SERVE_HOST = """
import json, os, sys, tempfile
import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

async def main():
    out = {}
    for name, flags in json.load(open(sys.argv[1])).items():
        # The whole environment: the SDK's default subset would drop TMPDIR.
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "ptc", "serve", *flags], env=dict(os.environ)
        )
        with tempfile.TemporaryFile("w+") as errlog:
            async with stdio_client(params, errlog=errlog) as streams:
                async with ClientSession(*streams) as session:
                    await session.initialize()
                    ran = await session.call_tool("run_code", {"code": "return 1"})
        text = "".join(c.text for c in ran.content if c.type == "text")
        out[name] = {"is_error": ran.is_error, "text": text, "structured": ran.structured_content}
    return out

print(json.dumps(anyio.run(main)))
"""


def test_serve_require_none_accepts_a_short_host_whose_error_names_it(envsim: Harness) -> None:
    inputs = {"default": [], "relaxed": ["--require", "none"]}
    out = envsim.run("E4-old", SERVE_HOST, inputs=inputs, timeout_s=90).output
    assert out is not None
    assert out["default"]["is_error"]
    assert "sandbox-unavailable" in out["default"]["text"]
    assert "(ptc run / ptc serve: --require " in out["default"]["text"]
    assert out["relaxed"]["is_error"] is False
    assert out["relaxed"]["structured"] == {"result": 1, "stdout": ""}


async def test_two_clients_of_one_http_server_each_have_their_own_session(
    tmp_path: Path,
) -> None:
    (tmp_path / "served_tools.py").write_text(TOOLS)
    command = [sys.executable, "-m", "ptc", "serve", "served_tools:register",
               "--http", "127.0.0.1:0"]  # fmt: skip
    process = await anyio.open_process(command, cwd=tmp_path, stdin=subprocess.DEVNULL)
    try:
        assert process.stderr is not None
        url = (await first_line(process.stderr)).split(" at ", 1)[1].split()[0]
        async with (
            streamable_http_client(url) as one_streams,
            ClientSession(*one_streams) as one,
            streamable_http_client(url) as two_streams,
            ClientSession(*two_streams) as two,
        ):
            await one.initialize()
            await two.initialize()
            (spec,) = (await one.list_tools()).tools
            assert "reset" in spec.input_schema["properties"] and "persist" in (
                spec.description or ""
            )
            await one.call_tool("run_code", {"code": "who = tools.shout(text='one')"})
            await two.call_tool("run_code", {"code": "who = 'two'"})
            mine = await one.call_tool("run_code", {"code": "return who"})
            theirs = await two.call_tool("run_code", {"code": "return who"})
            assert mine.structured_content == {"result": "ONE", "stdout": ""}
            assert theirs.structured_content == {"result": "two", "stdout": ""}
            assert mine.meta is not None and theirs.meta is not None
            ids = {m["ptc/run"]["session"]["id"] for m in (mine.meta, theirs.meta)}
            assert len(ids) == 2
    finally:
        await stop(process)
