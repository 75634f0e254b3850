"""docs/mcp.md's Python examples run as written, against the real servers (mount: inside a
temporary git repository; serve: over stdio with the client already gone, so it returns)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"

pytestmark = pytest.mark.slow


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The servers' commands (mcp-server-git, ...) are on the PATH of this interpreter's venv.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={**os.environ, "PATH": path},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_the_mount_example_runs(tmp_path: Path) -> None:
    for args in (["init", "-q"], ["config", "user.email", "a@b"], ["config", "user.name", "A"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True)
    (tmp_path / "notes.txt").write_text("hello\n")
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=tmp_path, check=True)
    mount_example = blocks()[0]
    assert "ptc_mcp.mount(" in mount_example
    done = run(mount_example, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "('git_status', 'git_diff_unstaged', 'git_diff_staged') " + (
        "('tz_get_current_time', 'tz_convert_time')"
    )
    assert lines[2] == "Commit history:"
    assert lines[3].startswith("FrozenList(['") and "+09:00" in lines[3]


def test_the_serve_example_runs_until_the_client_hangs_up(tmp_path: Path) -> None:
    serve_example = blocks()[1]
    assert "ptc_mcp.serve(agent)" in serve_example
    done = run(serve_example, tmp_path)
    assert done.returncode == 0, done.stderr
