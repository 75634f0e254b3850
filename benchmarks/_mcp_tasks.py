"""Native vs code mode over a real, mounted MCP server: the unmodified ``mcp-server-git``
(from the package index, started over stdio by ``ptc.mcp.mount``) on a repository this
module builds deterministically.

The task has the same three parts as those of ``_tasks.py``; ``expected`` asks ``git``
itself, never the MCP server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import ptc
from ptc import mcp as ptc_mcp

from ._tasks import JSON, Call, Policy, Task

MCP_TASK_NAMES = ("mcp_git_history",)
COMMITS = 14
LAST = 10
FILES = ["README.md", "parser.py", "lexer.py", "tests/test_parser.py", "docs/guide.md", "setup.py"]


def build_repo(path: Path) -> Path:
    """A repository of ``COMMITS`` commits, each touching one to three files, the same on
    every machine (fixed names, dates and contents)."""
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}

    def git(*args: str, when: int = 0) -> None:
        date = f"{1767225600 + when * 3600} +0000"  # 2026-01-01, one commit an hour
        dated = {**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        subprocess.run(["git", *args], cwd=path, env=dated, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    for index in range(COMMITS):
        touched = [FILES[(index * 7 + k * 3) % len(FILES)] for k in range(1 + index % 3)]
        for name in dict.fromkeys(touched):
            target = path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a") as handle:
                handle.write(f"change {index}\n")
        git("add", ".", when=index)
        message = f"change {index}: {', '.join(dict.fromkeys(touched))}"
        git("commit", "-q", "-m", message, when=index)
    return path


def _shas(log: str) -> list[str]:
    return [line.split()[1] for line in log.splitlines() if line.startswith("Commit: ")]


def _files(show: str) -> list[str]:
    return sorted({line[len("+++ b/"):] for line in show.splitlines() if line.startswith("+++ b/")})


def _answer(files_per_commit: list[list[str]]) -> JSON:
    counts = Counter(name for files in files_per_commit for name in files)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {"commits": len(files_per_commit), "most_changed": top[0][0],
            "changes": dict(sorted(counts.items()))}


def git_tasks(repo: Path) -> tuple[Task, ...]:
    """The git task over ``repo`` (see the module docstring)."""
    where = str(repo)

    def native(_: int) -> Policy:
        (log,) = yield [Call(name="git_log", arguments={"repo_path": where, "max_count": LAST})]
        shows = yield [Call(name="git_show", arguments={"repo_path": where, "revision": sha})
                       for sha in _shas(log)]
        return _answer([_files(show) for show in shows])

    def program(_: int) -> str:
        return f"""
log = tools.git_log(repo_path={where!r}, max_count={LAST})
shas = [line.split()[1] for line in log.splitlines() if line.startswith("Commit: ")]
shows = tools.git_show.map([{{"repo_path": {where!r}, "revision": s}} for s in shas])
counts = {{}}
for show in shows:
    files = {{line[len("+++ b/"):] for line in show.splitlines() if line.startswith("+++ b/")}}
    for name in files:
        counts[name] = counts.get(name, 0) + 1
top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
return {{"commits": len(shows), "most_changed": top[0][0], "changes": dict(sorted(counts.items()))}}
"""

    def expected(_: int) -> JSON:
        out = subprocess.run(
            ["git", "log", f"-{LAST}", "--name-only", "--format=%x00"],
            cwd=repo, check=True, capture_output=True, text=True,
        ).stdout
        commits = [sorted(set(chunk.split())) for chunk in out.split("\x00") if chunk.strip()]
        return _answer(commits)

    return (
        Task(name="mcp_git_history", kind="real MCP server (mcp-server-git): log + show each",
             prompt=f"Across the last {LAST} commits of the repository at {where}, which files "
                    "changed how often, and which changed most?",
             native=native, program=program, expected=expected),
    )


@asynccontextmanager
async def mcp_runtime(repo: Path, **runtime_options: Any) -> AsyncIterator[ptc.ToolRuntime]:
    """A runtime with ``mcp-server-git`` mounted on its root, serving ``repo``."""
    async with ptc.ToolRuntime(**runtime_options) as runtime:
        server = ptc_mcp.stdio(sys.executable, "-m", "mcp_server_git", "--repository", str(repo))
        await ptc_mcp.mount(runtime.root, server)
        yield runtime
