"""Worker latency benchmark: child-ready, end-to-end, call round trip, kill, idle PSS.

Run: ``.venv/bin/python benchmarks/worker_bench.py [--quick]``. Prints a table and the
enforcement report; writes ``benchmarks/results/worker.json``. Timings are medians and p99.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worker import CallReply, CallRequest, Limits, RunRequest, SubprocessBackend  # noqa: E402

SDK = """
class ToolCallError(Exception):
    pass

class _Tool:
    def __init__(self, name):
        self.name = name
    def __call__(self, **kwargs):
        ((ok, value),) = __transport__.call_batch([(self.name, kwargs)])
        if not ok:
            raise ToolCallError(value)
        return value

class tools:
    noop = _Tool("noop")

def parallel(*thunks):
    return [t() for t in thunks]
"""
LIMITS = Limits(wall_seconds=10, cpu_seconds=10)


async def noop(calls: Sequence[CallRequest]) -> list[CallReply]:
    return [CallReply.success(1) for _ in calls]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p99": pct(values, 0.99), "n": len(values)}


def pss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


async def run_once(b: SubprocessBackend, code: str, limits: Limits = LIMITS) -> Any:
    return await b.run(RunRequest(code=code, sdk_module=SDK, limits=limits), on_calls=noop)


async def bench(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with SubprocessBackend() as b:
        await anyio.sleep(0.2)
        # child ready from the zygote (fork -> contained -> ready)
        fresh = []
        for _ in range(n):
            t = time.perf_counter()
            child = await b.spawn()
            fresh.append((time.perf_counter() - t) * 1000)
            await child.close()
        out["ready_from_zygote_ms"] = summary(fresh)
        # child ready from the pool
        pooled = []
        for _ in range(n):
            await b.start()
            t = time.perf_counter()
            child = await b.take(RunRequest(code="", sdk_module=SDK, limits=LIMITS))
            pooled.append((time.perf_counter() - t) * 1000)
            await child.close()
        out["ready_from_pool_ms"] = summary(pooled)
        # idle pooled child PSS
        await b.start()
        out["idle_child_pss_kib"] = {
            "child": pss_kib(b.pooled[0].pid),
            "keeper": pss_kib(b.pooled[0].keeper_pid),
        }
        # end to end `return 1`: paced (pool warm) and back to back, vs bare python start
        paced, b2b, bare = [], [], []
        for _ in range(n):
            await anyio.sleep(0.05)
            t = time.perf_counter()
            res = await run_once(b, "return 1")
            paced.append((time.perf_counter() - t) * 1000)
            assert res.ok, res.detail
            t = time.perf_counter()
            await anyio.to_thread.run_sync(
                lambda: subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)
            )
            bare.append((time.perf_counter() - t) * 1000)
        for _ in range(n):
            t = time.perf_counter()
            await run_once(b, "return 1")
            b2b.append((time.perf_counter() - t) * 1000)
        out["run_return_1_paced_ms"] = summary(paced)
        out["run_return_1_back_to_back_ms"] = summary(b2b)
        out["bare_python_I_c_pass_ms"] = summary(bare)
        out["ratio_bare_over_back_to_back_p50"] = statistics.median(bare) / statistics.median(b2b)
        # call round trip, measured inside the program around each call
        code = (
            "import time\nts = []\nfor _ in range(2000):\n    t = time.perf_counter()\n"
            "    tools.noop()\n    ts.append((time.perf_counter() - t) * 1e6)\n"
            "ts.sort()\nreturn [ts[1000], ts[1979], sum(ts)]"
        )
        res = await run_once(b, code, Limits(wall_seconds=30, max_calls=5000))
        assert res.ok, res.detail
        p50, p99, total_us = res.value
        out["call_round_trip_us"] = {"p50": p50, "p99": p99, "calls_per_s": 2000 / (total_us / 1e6)}
        # kill latency: deadline -> tree gone and run returned
        kills = []
        for _ in range(max(5, n // 5)):
            res = await run_once(b, "while True: pass", Limits(wall_seconds=0.2))
            assert res.kind == "timeout"
            kills.append(res.stats.wall_ms - 200.0)
        out["kill_after_deadline_ms"] = summary(kills)
        res = await run_once(b, "return 1")
        out["enforcement"] = res.enforcement_json()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    n = 20 if args.quick else 100
    result = anyio.run(bench, n)
    rows = [(k, v) for k, v in result.items() if isinstance(v, dict) and "p50" in v]
    print(f"{'metric':40} {'p50':>10} {'p99':>10}")
    for name, v in rows:
        print(f"{name:40} {v['p50']:10.2f} {v['p99']:10.2f}")
    print(f"{'calls/s':40} {result['call_round_trip_us']['calls_per_s']:10.0f}")
    ratio = result["ratio_bare_over_back_to_back_p50"]
    print(f"{'bare python / back-to-back run (p50)':40} {ratio:10.2f}")
    print(f"{'idle pooled child PSS KiB':40} {result['idle_child_pss_kib']}")
    print("enforcement:")
    for dim, e in result["enforcement"].items():
        print(
            f"  {dim:10} {e['level']:8} {e['mechanism']}"
            + (f"  [gap: {e['gap']}]" if e["gap"] else "")
        )
    target = Path(__file__).resolve().parent / "results" / "worker.json"
    target.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
