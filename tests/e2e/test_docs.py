"""Every Python block of README.md and docs/*.md runs in the test suite.

The line before each block says how, as an HTML comment (invisible once rendered):

- ``<!-- docs-test: run -->`` — a complete program: run as written, it must exit 0;
- ``<!-- docs-test: setup NAME -->`` — a fragment: run (top-level ``await`` allowed) in the
  namespace the setup NAME below provides; every ``ToolResult`` it leaves must be a success;
- ``<!-- docs-test: tests/.../test_x.py -->`` — run by that test module, which checks what it
  prints (the module must exist and name the document);
- ``<!-- docs-test: illustrative (why) -->`` — a shape or an excerpt, not a program: it must
  still compile.

A block without a marker, or with a setup this module does not have, fails here.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(?:<!-- docs-test: (?P<marker>[^\n]*?) -->\n)?```python\n(?P<code>.*?)```", flags=re.S
)


@dataclass(frozen=True)
class Block:
    document: Path
    line: int
    marker: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str:
        return self.marker.split(" ", 1)[0]

    @property
    def argument(self) -> str:
        return self.marker.split(" ", 1)[1] if " " in self.marker else ""


def blocks() -> list[Block]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("code"))
            found.append(Block(document, line, match["marker"] or "", match["code"]))
    return found


def of_kind(kind: str) -> list[Any]:
    return [
        pytest.param(b, id=b.name, marks=SETUP_MARKS.get(b.argument, ()))
        for b in blocks()
        if b.kind == kind
    ]


# -- the setups a fragment may name ------------------------------------------------------


def search_tool() -> ptc.ToolDefinition:
    @ptc.tool(concurrency_safe=True)
    def search(query: str) -> list[str]:
        """Search the notes."""
        return [f"{query}-1", f"{query}-2"]

    return search


@asynccontextmanager
async def runtime_setup(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """``runtime``: an open ``ptc.ToolRuntime`` (real workers) with a ``search`` tool."""
    async with ptc.ToolRuntime() as runtime:
        runtime.register(search_tool())
        yield {"runtime": runtime, "agent": runtime.scope("agent")}


@asynccontextmanager
async def approvals_setup(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """``approvals``: a ``write`` tool, a ``program`` that calls it, a ``state_dir``, and
    ``ask_a_person``, who approves."""

    @ptc.tool
    def write(text: str) -> str:
        """Write a text."""
        return f"wrote {text}"

    async def ask_a_person(pending: Any) -> ptc.ApprovalAnswer:
        assert pending["name"] == "write"
        return "allowed-once"

    namespace: dict[str, Any] = {
        "write": write,
        "program": "return tools.write(text='hello')",
        "state_dir": tmp_path,
        "ask_a_person": ask_a_person,
    }
    yield namespace
    result = namespace["result"]
    assert result.value["result"] == "wrote hello"
    assert namespace["approvals"].qsize() == 1  # the approver was asked, once


@asynccontextmanager
async def tools_setup(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """``tools``: the ``search`` and ``read`` tools and an ``approve`` approver."""

    @ptc.tool
    def read(path: str) -> str:
        """Read a file."""
        return ""

    async def approve(request: ptc.ApprovalRequest) -> ptc.ApprovalAnswer:
        return "allowed-once"

    yield {"search": search_tool(), "read": read, "approve": approve}


@asynccontextmanager
async def specs_setup(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """``specs``: tool ``specs`` for ``sdkgen``, their ``names`` and one tool's ``keys``."""
    import sdkgen

    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "from": {"type": "string"}},
        "required": ["query"],
    }
    specs = [
        sdkgen.ToolSpec(name="web-search", description="Search the web.", input_schema=schema),
        sdkgen.ToolSpec(name="web_search", description="The same name as an identifier."),
    ]
    yield {"specs": specs, "names": [s.name for s in specs], "keys": ["query", "from"]}


SETUPS: dict[str, Callable[[Path], AbstractAsyncContextManager[dict[str, Any]]]] = {
    "runtime": runtime_setup,
    "approvals": approvals_setup,
    "tools": tools_setup,
    "specs": specs_setup,
}
SETUP_MARKS = {"runtime": pytest.mark.needs_root, "approvals": pytest.mark.needs_root}
"""Setups whose fragments run programs on real contained workers."""


# -- the tests ---------------------------------------------------------------------------


def test_every_block_says_how_it_is_tested() -> None:
    problems = []
    for block in blocks():
        if block.kind == "setup" and block.argument not in SETUPS:
            problems.append(f"{block.name}: no setup named {block.argument!r} in {__name__}")
        elif block.kind.startswith("tests/"):
            module = ROOT / block.kind
            if not module.is_file():
                problems.append(f"{block.name}: {block.kind} does not exist")
            elif block.document.name not in module.read_text(encoding="utf-8"):
                problems.append(f"{block.name}: {block.kind} never names {block.document.name}")
        elif block.kind not in ("run", "setup", "illustrative"):
            problems.append(f"{block.name}: no <!-- docs-test: ... --> line before it")
    assert problems == [], "\n".join(problems) + "\n(see the docstring of " + __file__ + ")"


@pytest.mark.parametrize("block", of_kind("illustrative"))
def test_an_illustrative_block_compiles(block: Block) -> None:
    compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@pytest.mark.parametrize("block", of_kind("run"))
def test_a_program_runs_as_written(block: Block, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.anyio
@pytest.mark.parametrize("block", of_kind("setup"))
async def test_a_fragment_runs_in_its_setup(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # what a fragment writes (an event log, say) stays here
    code = compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    async with SETUPS[block.argument](tmp_path) as namespace:
        namespace.update({"ptc": ptc, "anyio": anyio, "asyncio": __import__("asyncio")})
        try:
            with anyio.fail_after(120):
                done = eval(code, namespace)  # noqa: S307 - the documentation's own code
                if code.co_flags & inspect.CO_COROUTINE:
                    await done
            failed = {
                name: value.error
                for name, value in namespace.items()
                if isinstance(value, ptc.ToolResult) and value.is_error
            }
            assert failed == {}
        finally:
            for value in list(namespace.values()):
                if isinstance(value, ptc.ToolRuntime) and not value.closed:
                    await value.close()
