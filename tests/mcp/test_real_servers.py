"""The real, unmodified ``mcp-server-git`` (on a temporary repository) and ``mcp-server-time``
from the package index, mounted over stdio: native calls, code-mode programs on real
contained workers, and the same answers both ways."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import ptc
from ptc import mcp as ptc_mcp
from tests._typing import data

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ZONES = [
    "Asia/Tokyo",
    "Europe/Paris",
    "America/New_York",
    "Australia/Sydney",
    "Asia/Kolkata",
    "Europe/London",
    "America/Sao_Paulo",
    "Africa/Cairo",
    "Pacific/Auckland",
    "America/Los_Angeles",
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repo")

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "dev@example.com")
    git("config", "user.name", "Dev")
    for index, name in enumerate(["readme", "parser", "tests"]):
        (path / f"{name}.txt").write_text(f"{name} {index}\n")
        git("add", ".")
        git("commit", "-q", "-m", f"add {name}")
    git("branch", "feature")
    (path / "readme.txt").write_text("changed\n")  # an unstaged change
    return path


@pytest.fixture(scope="module")
async def rt(repo: Path) -> AsyncIterator[ptc.ToolRuntime]:
    async with ptc.ToolRuntime() as runtime:
        agent = runtime.scope("agent")
        await ptc_mcp.mount(
            agent, ptc_mcp.stdio(sys.executable, "-m", "mcp_server_git", "--repository", str(repo))
        )
        await ptc_mcp.mount(
            agent,
            ptc_mcp.stdio(sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"),
        )
        coder = agent.scope("coder")
        coder.present_as("code")
        yield runtime


def scopes(rt: ptc.ToolRuntime) -> tuple[ptc.Scope, ptc.Scope]:
    agent = rt.root.children[0]
    return agent, agent.children[0]


async def value(scope: ptc.Scope, name: str, arguments: dict[str, Any]) -> Any:
    result = await scope.call(name, arguments)
    assert not result.is_error, result.error
    return result.value


async def test_both_servers_are_mounted_with_their_annotations(rt: ptc.ToolRuntime) -> None:
    agent, coder = scopes(rt)
    visible = agent.view().visible
    assert len(visible) == 14  # 12 git tools, 2 time tools
    assert visible["git_status"].concurrency_safe is True
    assert visible["git_commit"].concurrency_safe is None
    assert visible["convert_time"].concurrency_safe is True
    assert "$defs" in visible["convert_time"].output.schema  # kept, with its $refs
    assert [t["name"] for t in coder.model_tools(format="mcp")] == ["run_code"]
    # The SDK a program is written against names every tool.
    sdk = coder.sdk()
    assert "def git_log(" in sdk and "def convert_time(" in sdk


async def test_a_git_program_answers_like_native_calls(rt: ptc.ToolRuntime, repo: Path) -> None:
    agent, coder = scopes(rt)
    path = str(repo)
    log = await value(agent, "git_log", {"repo_path": path, "max_count": 10})
    shas = [line.split()[1] for line in log.splitlines() if line.startswith("Commit: ")]
    assert len(shas) == 3
    native = {
        "status": await value(agent, "git_status", {"repo_path": path}),
        "diff": await value(agent, "git_diff_unstaged", {"repo_path": path}),
        "branches": await value(agent, "git_branch", {"repo_path": path, "branch_type": "local"}),
        "shows": [await value(agent, "git_show", {"repo_path": path, "revision": s}) for s in shas],
    }
    assert "readme.txt" in native["status"] and "+changed" in native["diff"]
    assert "feature" in native["branches"]
    program = f"""
path = {path!r}
log = tools.git_log(repo_path=path, max_count=10)
shas = [line.split()[1] for line in log.splitlines() if line.startswith("Commit: ")]
status, diff, branches = parallel(
    lambda: tools.git_status(repo_path=path),
    lambda: tools.git_diff_unstaged(repo_path=path),
    lambda: tools.git_branch(repo_path=path, branch_type="local"),
)
shows = tools.git_show.map([{{"repo_path": path, "revision": s}} for s in shas])
try:
    tools.git_show(repo_path=path, revision="no-such-revision")
except ToolCallError as exc:
    bad = exc.code
return {{"status": status, "diff": diff, "branches": branches, "shows": shows, "bad": bad}}
"""
    result = await coder.run_code(program)
    assert not result.is_error, result.error
    assert data(result.value)["result"] == {**native, "bad": "TOOL_ERROR"}
    assert len(data(result.meta)["dispatch_log"]) == 8  # eight calls to the real server
    assert {d["level"] for d in data(result.meta)["enforcement"].values()} == {"full"}


async def test_ten_timezones_in_one_program_answer_like_native_calls(rt: ptc.ToolRuntime) -> None:
    agent, coder = scopes(rt)
    native = [
        await value(
            agent,
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": zone},
        )
        for zone in ZONES
    ]
    assert native[0]["target"]["timezone"] == "Asia/Tokyo"
    assert native[0]["time_difference"] == "+9.0h"
    program = f"""
answers = tools.convert_time.map(
    [{{"source_timezone": "UTC", "time": "12:00", "target_timezone": z}} for z in {ZONES!r}]
)
return answers
"""
    result = await coder.run_code(program)
    assert not result.is_error, result.error
    assert data(result.value)["result"] == native
    now = await value(agent, "get_current_time", {"timezone": "Europe/Paris"})
    assert now["timezone"] == "Europe/Paris" and set(now) >= {"datetime", "is_dst"}


async def test_a_server_error_stays_a_tool_error(rt: ptc.ToolRuntime) -> None:
    agent, _ = scopes(rt)
    bad = await agent.call(
        "convert_time", {"source_timezone": "Mars/Base", "time": "12:00", "target_timezone": "UTC"}
    )
    assert bad.error is not None and bad.error.code == "TOOL_ERROR"
    assert "Mars/Base" in bad.error.message
