"""The public surface of ``ptc.mcp`` is pinned, and importing ``ptc`` never loads it."""

from __future__ import annotations

import subprocess
import sys

import ptc
from ptc import mcp as ptc_mcp

EXPECTED = [
    "BadSchemaPolicy",
    "BearerToken",
    "HttpServer",
    "Mount",
    "MountError",
    "StdioServer",
    "Transport",
    "http",
    "mount",
    "serve",
    "server",
    "stdio",
]


def test_all_is_pinned_and_exists() -> None:
    assert sorted(ptc_mcp.__all__) == sorted(EXPECTED)
    assert all(hasattr(ptc_mcp, name) for name in EXPECTED)


def test_mount_error_is_a_ptc_error_and_a_connection_error() -> None:
    assert issubclass(ptc_mcp.MountError, ptc.PtcError)
    assert issubclass(ptc_mcp.MountError, ConnectionError)


def test_importing_ptc_loads_neither_ptc_mcp_nor_the_sdk() -> None:
    code = (
        "import sys, ptc, ptc.__main__\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp' or m == 'ptc.mcp'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_public_entry_point_says_what_the_caller_gets() -> None:
    from tests._docstrings import private_references, undocumented

    assert undocumented(ptc_mcp) == []
    assert private_references(ptc_mcp) == []
