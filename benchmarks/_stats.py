"""Summary statistics and result writers shared by the benchmark suites.

Results go to ``benchmarks/results/<name>.json`` and ``<name>.md`` (and ``<name>.png`` for
charts); every JSON file carries the machine facts needed to read its figures.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).with_name("results")


@dataclass(frozen=True, kw_only=True)
class Summary:
    """Median and tail of a list of samples, in the samples' unit."""

    count: int
    median: float
    p99: float
    minimum: float
    maximum: float

    def as_dict(self) -> dict[str, float | int]:
        return {"count": self.count, "median": self.median, "p99": self.p99,
                "min": self.minimum, "max": self.maximum}


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1); p99 of fewer than 100 samples is the max."""
    if not samples:
        raise ValueError("percentile of no samples")
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summarize(samples: Sequence[float]) -> Summary:
    return Summary(count=len(samples), median=statistics.median(samples),
                   p99=percentile(samples, 0.99), minimum=min(samples), maximum=max(samples))


def machine_facts() -> dict[str, Any]:
    """The host facts every result carries (:func:`benchmarks._host.host_facts`)."""
    from ._host import host_facts

    return host_facts()


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_results(name: str, payload: dict[str, Any], markdown: str,
                  directory: Path = RESULTS_DIR) -> tuple[Path, Path]:
    """Write ``<name>.json`` and ``<name>.md``; returns both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / f"{name}.json", directory / f"{name}.md"
    json_path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    md_path.write_text(markdown, encoding="utf-8")
    return json_path, md_path


def progress(message: str) -> None:
    """One progress line on stderr (the long parts of both suites report through this)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)
