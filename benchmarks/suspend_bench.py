"""What a resume costs as a function of the calls it replays.

``python -m benchmarks.suspend_bench [--replayed 0,10,100,500] [--reps 15]``. A program
makes N calls to a trivial tool, then one that asks and is deferred; each repetition
suspends it and resumes it with ``allowed-once`` on a real contained worker. Reports the
resume's wall time (median, p99) per N next to a fresh run of the same program with the
approver saying yes at once (same runtime, same run), and writes
``benchmarks/results/suspend.{json,md}``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

import anyio

import ptc

from . import _stats

PROGRAM = "for i in range({n}):\n    tools.echo(x=i)\nreturn tools.commit(x={n})"


def _q(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50": statistics.median(ordered), "p99": p99, "n": len(ordered)}


async def measure(replayed: Sequence[int], reps: int) -> dict[str, Any]:
    decision: dict[str, ptc.ApprovalAnswer] = {"answer": "deferred"}

    async def approver(request: ptc.ApprovalRequest) -> ptc.ApprovalAnswer:
        return decision["answer"]

    limits = ptc.Limits(max_calls=max(replayed) + 10)
    out: dict[str, Any] = {}
    async with ptc.ToolRuntime(default_mode="code", approver=approver, limits=limits) as rt:

        @rt.tool(concurrency_safe=True)
        async def echo(x: int) -> int:
            """Return x."""
            return x

        @rt.tool
        async def commit(x: int) -> int:
            """Commit (asks first)."""
            return x

        async def ask(execution: ptc.ToolExecution, nxt: Any) -> Any:
            return ptc.Ask("commit?") if execution.name == "commit" else await nxt()

        rt.on("tools/pre-execute", ask)
        await rt.root.prepare()
        await rt.root.run_code("return 1")  # warm the zygote and the pool
        for n in replayed:
            code = PROGRAM.format(n=n)
            resume_ms: list[float] = []
            direct_ms: list[float] = []
            for _ in range(reps):
                decision["answer"] = "deferred"
                suspended = await rt.root.run_code(code)
                assert suspended.error is not None and suspended.error.code == "SUSPENDED"
                token = suspended.meta["suspension"]["token"]  # type: ignore[call-overload,index]
                assert isinstance(token, str)
                started = time.perf_counter()
                resumed = await rt.root.resume(token, "allowed-once")
                resume_ms.append((time.perf_counter() - started) * 1000)
                assert not resumed.is_error, resumed.content
                decision["answer"] = "allowed-once"
                started = time.perf_counter()
                fresh = await rt.root.run_code(code)
                direct_ms.append((time.perf_counter() - started) * 1000)
                assert not fresh.is_error, fresh.content
            out[str(n)] = {"resume_ms": _q(resume_ms), "fresh_run_ms": _q(direct_ms)}
    return out


def render(results: dict[str, Any]) -> str:
    lines = [
        "# Resume cost by replayed calls",
        "",
        "| replayed calls | resume p50 ms | p99 | fresh run p50 ms | p99 | resume / fresh |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, row in results.items():
        r, f = row["resume_ms"], row["fresh_run_ms"]
        ratio = r["p50"] / f["p50"] if f["p50"] else float("nan")
        lines.append(
            f"| {n} | {r['p50']:.2f} | {r['p99']:.2f} | {f['p50']:.2f} | {f['p99']:.2f} "
            f"| {ratio:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suspend_bench")
    parser.add_argument("--replayed", default="0,10,100,500")
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.replayed.split(",") if x]
    results = anyio.run(measure, counts, args.reps)
    markdown = render(results)
    print(markdown)
    _stats.write_results(
        "suspend", {"results": results, "machine": _stats.machine_facts()}, markdown
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
