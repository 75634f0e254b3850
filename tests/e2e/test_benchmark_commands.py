"""The benchmark suites end to end, through their command line in a subprocess (tests import
no benchmark): every task of the native-vs-code suite gives the expected answer in both modes
(the scripted model; the git task over a real ``mcp-server-git``), the suite through the
pydantic-ai adapter with its test model, and what each writes. Real contained workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]

TASKS = (
    *("docs_search_read", "sales_pages_units", "revenue_usd_join", "top_customers_join"),
    *("weather_fanout_20", "low_stock_filter", "job_poll_retry", "single_rate"),
    *("stock_value_large", "mcp_git_history"),
)
"""Every task of the suite but the 1,000-tool catalog one (its catalog and search are tested
in ``tests/ptc/test_catalog.py``; building it costs more than the rest together)."""


def bench(*argv: str) -> None:
    """``python -m benchmarks ARGV`` from the source tree; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-4000:])


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[tuple[str, str], Any]]:
    """The quick suite, each task once per mode: its directory and its rows by task and mode."""
    out = tmp_path_factory.mktemp("suite")
    bench("suite", "--quick", "--tasks", ",".join(TASKS), "--out", str(out))
    rows = json.loads((out / "native_vs_code.json").read_text())["rows"]
    return out, {(r["task"], r["mode"]): r for r in rows}


def test_the_quick_suite_writes_its_table_json_and_chart(
    quick: tuple[Path, dict[tuple[str, str], Any]],
) -> None:
    out, rows = quick
    assert set(rows) == {(t, m) for t in TASKS for m in ("native", "code")}
    assert "| job_poll_retry | native | 7 |" in (out / "native_vs_code.md").read_text()
    assert (out / "native_vs_code.png").read_bytes().startswith(b"\x89PNG")


def test_every_task_gives_the_expected_answer_in_both_modes(
    quick: tuple[Path, dict[tuple[str, str], Any]],
) -> None:
    _, rows = quick
    for task in TASKS:
        native, code = rows[(task, "native")], rows[(task, "code")]
        assert native["correct"] and code["correct"], (task, native["answer"], code["answer"])
        assert native["answer"] == code["answer"], task
        # Code mode: one program, then the answer; the same tool calls run either way.
        assert code["model_turns"] == 2 and native["model_turns"] >= 2, task
        assert code["tool_calls_executed"] == native["tool_calls_executed"], task


def test_the_git_task_takes_the_turns_and_calls_each_mode_should(
    quick: tuple[Path, dict[tuple[str, str], Any]],
) -> None:
    _, rows = quick
    native, code = rows[("mcp_git_history", "native")], rows[("mcp_git_history", "code")]
    assert code["answer"]["commits"] == 10 and sum(code["answer"]["changes"].values()) >= 10
    # Native: log, then ten shows, then the answer; code: one program, then the answer.
    assert (native["model_turns"], native["tool_calls_executed"]) == (3, 11)
    assert (code["model_turns"], code["tool_calls_executed"]) == (2, 11)


def test_the_suite_runs_through_pydantic_ai_and_writes_results_and_transcripts(
    tmp_path: Path,
) -> None:
    bench("suite", "--model", "test", "--tasks", "docs_search_read,job_poll_retry",
          "--out", str(tmp_path))  # fmt: skip
    payload = json.loads((tmp_path / "native_vs_code_model_test.json").read_text())
    episodes = {(e["task"], e["mode"]): e for e in payload["episodes"]}
    assert set(episodes) == {(t, m) for t in ("docs_search_read", "job_poll_retry")
                             for m in ("native", "code")}  # fmt: skip
    assert all(e["correct"] and not e["error"] for e in episodes.values())
    native, code = episodes[("docs_search_read", "native")], episodes[("docs_search_read", "code")]
    assert (native["requests"], code["requests"]) == (3, 2)  # search, read all, answer
    assert code["model_tool_calls"] == 1 and code["tools_executed"] == native["tools_executed"]
    assert native["input_tokens"] > 0 and code["output_tokens"] > 0
    transcripts = tmp_path / "native_vs_code_model_test_transcripts"
    messages = json.loads((transcripts / "docs_search_read-code.json").read_text())
    assert any(p.get("tool_name") == "run_code" for m in messages for p in m["parts"])
    table = (tmp_path / "native_vs_code_model_test.md").read_text()
    assert "| docs_search_read | code | 2 |" in table
