"""``python -m benchmarks suite --model test``: the task suite through the pydantic-ai adapter
with pydantic-ai's FunctionModel playing the scripted model, on real contained workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import native_vs_code
from benchmarks._model import answer_mentions, is_right


@pytest.mark.needs_root
@pytest.mark.slow
def test_the_suite_runs_through_pydantic_ai_and_writes_results_and_transcripts(
    tmp_path: Path,
) -> None:
    argv = ["--model", "test", "--tasks", "docs_search_read,job_poll_retry", "--out", str(tmp_path)]
    assert native_vs_code.main(argv) == 0
    payload = json.loads((tmp_path / "native_vs_code_model_test.json").read_text())
    episodes = {(e["task"], e["mode"]): e for e in payload["episodes"]}
    assert set(episodes) == {(t, m) for t in ("docs_search_read", "job_poll_retry")
                             for m in ("native", "code")}
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


@pytest.mark.parametrize(
    ("expected", "text", "right"),
    [
        ({"a": 1}, '{"a": 1}', True),
        ({"a": 1}, '```json\n{"a": 1}\n```', True),
        ([1.5, "x"], "The answer is 1.5 and x.", True),
        ({"a": 1}, '{"a": 2}', False),
    ],
)
def test_an_answer_is_right_as_json_or_when_it_mentions_every_value(
    expected: object, text: str, right: bool
) -> None:
    assert is_right(expected, text) is right
    assert answer_mentions({"k": [1, 2]}, "k: 1, 2") and not answer_mentions([3], "none")
