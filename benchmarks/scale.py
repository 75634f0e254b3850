"""How a run scales with its number of nested calls: one program making many calls.

``python -m benchmarks scale [--quick] [--sizes 1000,10000,100000] [--ways loop,map,gather]``
runs, on a warm pool with full containment, one ``run_code`` per way and size: a program
making that many calls of a trivial async (parallel-safe) tool in a ``for`` loop, in one
``tools.x.map([...])``, or in one ``asyncio.gather(...)``. Per run: the seconds, the
microseconds per call (and their ratio to the smallest size's), the worst event-loop stall
(a heartbeat task sleeping 1 ms: how long every other task on the host waited, the time
the machine gave other processes included), the most CPU time one event-loop callback took
(the host's own work holding the loop), the host's and the child's CPU time, the pauses of
the garbage collector's full collections, and the host's RSS before the run and after it
(its result dropped, a full collection, half a second).
Results: ``benchmarks/results/scale.{json,md}``, with the host's facts and its load average at
the start and the end; the targets (docs/benchmarks.md, "Scale") are checked.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

import ptc

from . import _host, _stats
from ._episodes import runtime_kwargs
from ._latency_extra import worst_stall_ms

RESULT_NAME = "scale"
WAYS = ("loop", "map", "gather")
SIZES = (1_000, 10_000, 100_000)
PROGRAMS = {
    "loop": "total = 0\nfor i in range({n}):\n    total += tools.echo(i=i)\nreturn total",
    "map": "return sum(tools.echo.map([{{'i': i}} for i in range({n})]))",
    "gather": (
        "import asyncio\n"
        "async def main():\n"
        "    return sum(await asyncio.gather(*[tools.echo(i=i) for i in range({n})]))\n"
        "return asyncio.run(main())"
    ),
}
TARGETS = {
    "map_100000_s": 30.0,
    "per_call_ratio_100000_to_1000": 1.5,
    "worst_stall_ms": 20.0,
    "rss_growth_mib": 10.0,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="sizes 1000 and 10000 only")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="comma-separated call counts (default 1000,10000,100000)")
    parser.add_argument("--ways", default=",".join(WAYS),
                        help="comma-separated: loop, map, gather (default all three)")
    parser.add_argument("--relaxed-containment", action="store_true",
                        help="do not require full containment")
    parser.add_argument("--out", type=Path, default=_stats.RESULTS_DIR, help="results directory")
    return parser


def rss_mib() -> float:
    """This process's resident set now (MiB)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class CallbackCpu:
    """The most CPU time one event-loop callback took while measuring: the host's own work
    holding the loop, apart from the time the machine gave other processes (which a
    heartbeat's lateness counts too). asyncio's ``Handle._run`` is wrapped meanwhile."""

    def __init__(self) -> None:
        self.worst_ms = 0.0
        self.where = ""
        self._original = asyncio.events.Handle._run
        self._measuring = False

    def __enter__(self) -> CallbackCpu:
        original = self._original

        def timed(handle: asyncio.events.Handle) -> None:
            started = time.thread_time()
            original(handle)
            spent = (time.thread_time() - started) * 1000
            # Not the callback that ends the measurement: the benchmark's own work after it
            # (a full collection) runs in it too.
            if self._measuring and spent > self.worst_ms:
                self.worst_ms = spent
                self.where = repr(handle)[:160]

        self._measuring = True
        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._measuring = False
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]


class GcPauses:
    """The pauses of the garbage collector's full (generation 2) collections, as they come."""

    def __init__(self) -> None:
        self.pauses_ms: list[float] = []
        self._started = 0.0

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses_ms.append((time.perf_counter() - self._started) * 1000)


async def _measure(scope: ptc.Scope, way: str, size: int) -> dict[str, Any]:
    program = PROGRAMS[way].format(n=size)
    gc.collect()
    before = rss_mib()
    outcome: dict[str, Any] = {}

    async def run() -> None:
        started, cpu = time.perf_counter(), time.process_time()
        result = await scope.run_code(program)
        outcome["seconds"] = time.perf_counter() - started
        outcome["host_cpu_s"] = time.process_time() - cpu
        if result.is_error or result.value is None:
            raise RuntimeError(f"{way} of {size}: {result.content}")
        value: Any = result.value
        if value["result"] != size * (size - 1) // 2:
            raise RuntimeError(f"{way} of {size}: wrong sum {value['result']}")
        meta: Any = result.meta
        outcome["child_cpu_s"] = meta["stats"]["cpu_ms"] / 1000

    with GcPauses() as pauses, CallbackCpu() as callbacks:
        stall, _ = await worst_stall_ms(run)  # full GC pauses: GcPauses, over the run only
    gc.collect()
    await anyio.sleep(0.5)
    gc.collect()
    after = rss_mib()
    seconds = outcome["seconds"]
    row = {
        "way": way,
        "calls": size,
        "seconds": seconds,
        "us_per_call": seconds * 1e6 / size,
        "host_cpu_s": outcome["host_cpu_s"],
        "host_cpu_us_per_call": outcome["host_cpu_s"] * 1e6 / size,
        "child_cpu_s": outcome["child_cpu_s"],
        "worst_stall_ms": stall,
        "worst_callback_cpu_ms": callbacks.worst_ms,
        "worst_callback": callbacks.where,
        "gc_full_collections": len(pauses.pauses_ms),
        "worst_gc_pause_ms": max(pauses.pauses_ms, default=0.0),
        "rss_before_mib": before,
        "rss_after_mib": after,
        "load_average_after": _host.load(),
    }
    _stats.progress(
        f"{way} of {size}: {seconds:.2f} s, {row['us_per_call']:.0f} us/call (host CPU "
        f"{row['host_cpu_us_per_call']:.0f}), stall {stall:.1f} ms (worst callback "
        f"{callbacks.worst_ms:.1f} ms of CPU), GC {row['worst_gc_pause_ms']:.1f} ms, RSS "
        f"{before:.0f} -> {after:.0f}"
    )
    return row


async def _suite(sizes: Sequence[int], ways: Sequence[str], relaxed: bool) -> list[dict[str, Any]]:
    top = max(sizes)
    limits = ptc.Limits(
        max_calls=top, wall_seconds=3600, cpu_seconds=3600, memory_mib=4096, result_bytes=1 << 20
    )
    rows: list[dict[str, Any]] = []
    async with ptc.ToolRuntime(**runtime_kwargs(relaxed), limits=limits) as runtime:

        @runtime.tool(concurrency_safe=True)
        async def echo(i: int) -> int:
            """Return i (a trivial async tool)."""
            return i

        scope = runtime.scope("scale")
        scope.present_as("code")
        result = await scope.run_code("return tools.echo(i=1)")  # the zygote and the pool
        if result.is_error:
            raise RuntimeError(f"warm-up failed: {result.content}")
        rows.extend([await _measure(scope, way, size) for way in ways for size in sizes])
    return rows


def evaluate(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets, each with what was measured and whether it was met."""
    checks: list[dict[str, Any]] = []
    by = {(r["way"], r["calls"]): r for r in rows}
    big = by.get(("map", 100_000))
    if big is not None:
        checks.append({"target": "a .map of 100,000 calls <= 30 s",
                       "measured": f"{big['seconds']:.1f} s",
                       "met": big["seconds"] <= TARGETS["map_100000_s"]})
    for way in WAYS:
        small, large = by.get((way, 1_000)), by.get((way, 100_000))
        if small is not None and large is not None:
            ratio = large["us_per_call"] / small["us_per_call"]
            checks.append({"target": f"{way}: us per call at 100,000 within 1.5x of 1,000's",
                           "measured": f"{ratio:.2f}x",
                           "met": ratio <= TARGETS["per_call_ratio_100000_to_1000"]})
    if rows:
        stall = max(r["worst_stall_ms"] for r in rows)
        growth = max(r["rss_after_mib"] - r["rss_before_mib"] for r in rows)
        held = max(r["worst_callback_cpu_ms"] for r in rows)
        checks.append({"target": "worst event-loop stall <= 20 ms",
                       "measured": f"{stall:.1f} ms (the longest callback: {held:.1f} ms of CPU)",
                       "met": stall <= TARGETS["worst_stall_ms"]})
        checks.append({"target": "host RSS after a run within 10 MiB of before",
                       "measured": f"+{growth:.1f} MiB",
                       "met": growth <= TARGETS["rss_growth_mib"]})
    return checks


def render(rows: Sequence[dict[str, Any]], machine: dict[str, Any]) -> str:
    smallest = {r["way"]: r["us_per_call"] for r in rows if r["calls"] == min(
        x["calls"] for x in rows if x["way"] == r["way"])}
    table = [
        [r["way"], r["calls"], r["seconds"], r["us_per_call"],
         f"{r['us_per_call'] / smallest[r['way']]:.2f}x", r["host_cpu_us_per_call"],
         r["child_cpu_s"], r["worst_stall_ms"], r["worst_callback_cpu_ms"],
         r["worst_gc_pause_ms"], r["gc_full_collections"], r["rss_before_mib"],
         r["rss_after_mib"]]
        for r in rows
    ]
    checks = evaluate(rows)
    return (
        "# Scale: one program making many nested calls\n\n"
        f"Host: {_host.describe(machine)}\n\n"
        + _stats.markdown_table(
            ["way", "calls", "s", "us/call", "vs smallest", "host CPU us/call",
             "child CPU s", "worst stall ms", "worst callback CPU ms", "worst full GC ms",
             "full GCs", "RSS before MiB", "RSS after MiB"],
            table,
        )
        + "\n## Targets\n\n"
        + _stats.markdown_table(
            ["target", "measured", "met"],
            [[c["target"], c["measured"], "yes" if c["met"] else "no"] for c in checks],
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sizes = (1_000, 10_000) if args.quick else tuple(int(s) for s in args.sizes.split(","))
    ways = tuple(w for w in args.ways.split(",") if w)
    unknown = [w for w in ways if w not in WAYS]
    if unknown or not sizes or min(sizes) < 1:
        _parser().error(f"--ways from {','.join(WAYS)}; --sizes positive integers")
    machine = _host.host_facts()
    _stats.progress("scale suite, host: " + _host.describe(machine))
    rows = anyio.run(_suite, sizes, ways, args.relaxed_containment)
    machine["load_average_at_end"] = _host.load()
    markdown = render(rows, machine)
    payload = {"rows": rows, "targets": evaluate(rows), "machine": machine}
    json_path, md_path = _stats.write_results(RESULT_NAME, payload, markdown, args.out)
    print(markdown)
    print(f"results: {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
