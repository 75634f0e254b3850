"""``python -m benchmarks scale`` end to end at a tiny size: every way runs on a real
runtime and the report is written (its figures are the benchmark's, not asserted here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import scale

pytestmark = pytest.mark.needs_root


def test_the_scale_suite_runs_every_way_and_writes_its_report(tmp_path: Path) -> None:
    assert scale.main(["--sizes", "10,20", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "scale.json").read_text(encoding="utf-8"))["rows"]
    assert {(r["way"], r["calls"]) for r in rows} == {
        (way, size) for way in scale.WAYS for size in (10, 20)
    }
    assert all(isinstance(r["worst_stall_ms"], float) for r in rows)
    assert "## Targets" in (tmp_path / "scale.md").read_text(encoding="utf-8")
