"""The native-vs-code task over a real mounted server (benchmarks/_mcp_tasks.py) gets the
right answer in both modes, with the turns and calls each mode should take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_the_git_task_answers_right_in_both_modes(tmp_path: Path) -> None:
    from benchmarks import native_vs_code

    argv = ["--quick", "--tasks", "mcp_git_history", "--out", str(tmp_path), "--no-chart"]
    assert native_vs_code.main(argv) == 0
    rows = {
        r["mode"]: r for r in json.loads((tmp_path / "native_vs_code.json").read_text())["rows"]
    }
    assert set(rows) == {"native", "code"} and all(r["correct"] for r in rows.values())
    answer = rows["code"]["answer"]
    assert answer["commits"] == 10 and sum(answer["changes"].values()) >= 10
    # Native: log, then ten shows, then the answer; code: one program, then the answer.
    assert (rows["native"]["model_turns"], rows["native"]["tool_calls_executed"]) == (3, 11)
    assert (rows["code"]["model_turns"], rows["code"]["tool_calls_executed"]) == (2, 11)
