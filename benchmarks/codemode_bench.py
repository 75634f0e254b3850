"""Code mode's own costs: a nested call vs a direct call through the same pipeline, and
``run_code`` end to end for a constant and for a program making 100 calls.

``python -m benchmarks.codemode_bench [--calls 2000] [--runs 60]``. The nested round trip is
timed inside the program (``time.perf_counter`` around each SDK call), so its distribution
is per call, not a mean. Writes ``benchmarks/results/codemode.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

import anyio

import ptc

from . import _stats

NESTED = """
import time
laps = []
for i in range({n}):
    t = time.perf_counter()
    tools.echo(x=i)
    laps.append(time.perf_counter() - t)
return laps
"""
HUNDRED = "for i in range(100):\n    tools.echo(x=i)\nreturn 1"


def _q(samples: Sequence[float], scale: float) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50": statistics.median(ordered) * scale, "p99": p99 * scale, "n": len(ordered)}


async def measure(calls: int, runs: int) -> dict[str, Any]:
    async with ptc.ToolRuntime(limits=ptc.Limits(max_calls=calls + 10)) as runtime:

        @runtime.tool(concurrency_safe=True)
        async def echo(x: int) -> int:
            """Return x."""
            return x

        agent = runtime.scope("bench")
        agent.present_as("both")
        direct = []
        for i in range(calls):
            t = time.perf_counter()
            await agent.call("echo", {"x": i})
            direct.append(time.perf_counter() - t)
        await agent.run_code("return 1")  # warm the zygote and the pool
        result = await agent.run_code(NESTED.format(n=calls))
        assert not result.is_error, result.content
        value = result.value
        assert isinstance(value, dict) and isinstance(value["result"], list)
        nested = [float(x) for x in value["result"] if isinstance(x, int | float)]
        constant, hundred = [], []
        for _ in range(runs):
            await anyio.sleep(0.05)  # as in an agent loop: runs apart, the pool refilled
            t = time.perf_counter()
            r = await agent.run_code("return 1")
            constant.append(time.perf_counter() - t)
            assert not r.is_error, r.content
            t = time.perf_counter()
            r = await agent.run_code(HUNDRED)
            hundred.append(time.perf_counter() - t)
            assert not r.is_error, r.content
        example = await agent.run_code(
            "a = tools.echo(x=1)\nb = tools.echo.map([{'x': 2}, {'x': 3}])\nreturn [a, b]"
        )
        return {
            "direct_call_us": _q(direct, 1e6),
            "nested_call_us": _q(nested, 1e6),
            "run_code_constant_ms": _q(constant, 1e3),
            "run_code_100_calls_ms": _q(hundred, 1e3),
            "example_dispatch_log": json.loads(json.dumps(example.meta["dispatch_log"])),
            "example_enforcement": json.loads(json.dumps(example.meta["enforcement"])),
        }


def render(result: dict[str, Any]) -> str:
    d, n = result["direct_call_us"], result["nested_call_us"]
    c, h = result["run_code_constant_ms"], result["run_code_100_calls_ms"]
    lines = [
        "| measure | p50 | p99 | n |",
        "|---|---|---|---|",
        f"| direct call, in-process pipeline (µs) | {d['p50']:.1f} | {d['p99']:.1f} | {d['n']} |",
        f"| nested call from a program (µs) | {n['p50']:.1f} | {n['p99']:.1f} | {n['n']} |",
        f"| nested / direct (p50) | {n['p50'] / d['p50']:.1f}x | | |",
        f"| run_code `return 1` (ms) | {c['p50']:.2f} | {c['p99']:.2f} | {c['n']} |",
        f"| run_code, 100 sequential calls (ms) | {h['p50']:.2f} | {h['p99']:.2f} | {h['n']} |",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.codemode_bench")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args(argv)
    result = anyio.run(measure, args.calls, args.runs)
    markdown = "# Code mode costs\n\n" + render(result) + "\n"
    payload = {"machine": _stats.machine_facts(), **result}
    json_path, md_path = _stats.write_results("codemode", payload, markdown)
    print(markdown)
    print("dispatch log of the example run:")
    print(json.dumps(result["example_dispatch_log"], indent=2))
    print(f"results: {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
