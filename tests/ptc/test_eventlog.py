"""EventLog writes one record per call (and per logged nested call); the tree reads them back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ptc
from ptc.__main__ import main as cli
from ptc._observe._calltree import build_trees, read_records, render_trees
from tests._typing import data
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio

PROGRAM = """
x = tools.add(a=1, b=2)
try:
    tools.add(a=-1, b=0)
except ToolCallError as e:
    print(e.code)
return tools.add.map([{"a": x, "b": 1}, {"a": 2, "b": 2}])
"""


async def _run(path: Path) -> ptc.ToolResult:
    log = ptc.EventLog(path)
    async with ptc.ToolRuntime(
        backend=FakeBackend(), containment=ptc.Containment(require=frozenset())
    ) as runtime:
        log.attach(runtime)

        @runtime.tool(concurrency_safe=True)
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        agent = runtime.scope("agent")
        agent.present_as("code")
        agent.guard(lambda ex: "no negatives" if data(ex.arguments).get("a", 0) < 0 else None)
        result = await agent.run_code(PROGRAM, call_id="outer")
        await agent.call("add", {"a": 1, "b": 1}, call_id="direct")  # collapsed: UNKNOWN_TOOL
    log.close()
    return result


async def test_records_every_call_with_parent_decision_and_timing(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    result = await _run(path)
    assert not result.is_error
    records = read_records(path)
    calls = {r["call_id"]: r for r in records if r["event"] == "call"}
    nested = {f"outer:ptc:{n}" for n in range(1, 5)}
    assert set(calls) == {"outer", "direct"} | nested
    assert calls["outer"]["parent_call_id"] is None
    assert calls["outer:ptc:2"]["parent_call_id"] == "outer"
    assert calls["outer:ptc:2"]["root_call_id"] == "outer"
    assert calls["outer:ptc:2"]["decision"] == "DENIED"
    assert calls["outer:ptc:2"]["arguments"] == {"a": -1, "b": 0}
    assert calls["outer:ptc:1"]["decision"] == "allowed"
    assert calls["outer:ptc:1"]["content"] == [{"type": "text", "text": "3"}]
    assert calls["direct"]["decision"] == "UNKNOWN_TOOL"
    assert all(isinstance(calls[c]["duration_ms"], float) for c in calls if c != "direct")
    # A dispatch record is written as its call ends: the two sequential calls in order, then
    # the `.map`'s two, which run concurrently and may end either way round.
    sub_call_ids = [r["sub_call_id"] for r in records if r["event"] == "dispatch"]
    assert sub_call_ids[:2] == ["outer:ptc:1", "outer:ptc:2"]
    assert sorted(sub_call_ids[2:]) == ["outer:ptc:3", "outer:ptc:4"]
    # Every line is plain JSON.
    for line in path.read_text().splitlines():
        json.loads(line)


async def test_tree_nests_nested_calls_under_run_code(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    await _run(path)
    roots = build_trees(read_records(path))
    assert [r.call_id for r in roots] == ["outer", "direct"]
    assert [c.call_id for c in roots[0].children] == [f"outer:ptc:{n}" for n in range(1, 5)]
    text = render_trees(roots)
    assert "├─ outer:ptc:1 add" in text and "└─ outer:ptc:4 add" in text
    assert "[DENIED]" in text


async def test_cli_tree_prints_and_rejects_garbage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "events.jsonl"
    await _run(path)
    assert cli(["tree", str(path)]) == 0
    assert "outer:ptc:3" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert cli(["tree", str(bad)]) == 2
    assert "not JSON" in capsys.readouterr().err
