"""Pipeline overhead: one direct call to a trivial async tool with no listeners.

Reports median and p99 of 10,000 ``scope.call`` round trips next to a plain ``await fn()``
baseline measured in the same run, prints a table and writes
``benchmarks/results/pipeline_overhead.json``.
Run: ``.venv/bin/python benchmarks/pipeline_overhead.py``
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import anyio

import ptc

CALLS = 10_000
RESULTS = Path(__file__).parent / "results" / "pipeline_overhead.json"


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def main() -> dict[str, Any]:
    async def trivial(arguments: Any, context: Any) -> int:
        return 1

    definition = ptc.define_tool(
        name="trivial",
        description="Return 1.",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
        output=ptc.Output({"type": "integer"}, lambda v: [{"type": "text", "text": str(v)}]),
        execute=trivial,
    )
    async with ptc.ToolRuntime() as runtime:
        runtime.register(definition)
        scope = runtime.root
        for _ in range(500):  # warm-up
            await scope.call("trivial", {"x": 1})
            await trivial({"x": 1}, None)
        baseline: list[float] = []
        pipeline: list[float] = []
        clock = time.perf_counter_ns
        for _ in range(CALLS):
            start = clock()
            await trivial({"x": 1}, None)
            baseline.append((clock() - start) / 1000)
            start = clock()
            result = await scope.call("trivial", {"x": 1})
            pipeline.append((clock() - start) / 1000)
            assert not result.is_error
    pipeline_median = statistics.median(pipeline)
    baseline_median = statistics.median(baseline)
    return {
        "calls": CALLS,
        "pipeline_us": {"median": pipeline_median, "p99": _percentile(pipeline, 0.99)},
        "baseline_us": {"median": baseline_median, "p99": _percentile(baseline, 0.99)},
        "ratio_median": pipeline_median / baseline_median,
        "overhead_median_us": pipeline_median - baseline_median,
        "calls_per_second": 1e6 / pipeline_median,
    }


def _print(report: dict[str, Any]) -> None:
    print(f"{'path':<22}{'median us':>12}{'p99 us':>12}")
    for label, key in (
        ("scope.call (pipeline)", "pipeline_us"),
        ("await fn() baseline", "baseline_us"),
    ):
        row = report[key]
        print(f"{label:<22}{row['median']:>12.2f}{row['p99']:>12.2f}")
    print(
        f"ratio (median): {report['ratio_median']:.1f}x;"
        f" overhead {report['overhead_median_us']:.1f} us;"
        f" {report['calls_per_second']:.0f} calls/s"
    )


if __name__ == "__main__":
    result = anyio.run(main)
    _print(result)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
