"""Fixtures of the ptc.mcp tests: the toy server (built with the official SDK) and helpers."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc
from ptc import mcp as ptc_mcp

TOY = Path(__file__).with_name("toy_server.py")


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
