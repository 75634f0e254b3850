"""Latency of code mode against its baselines, side by side in one run (median and p99).

``python -m benchmarks.latency [--quick] [--scale F] [--runs N]`` (or ``python -m benchmarks
latency``; ``make bench-latency`` runs it three times).
Measures: run_code returning a constant (pool warm, full containment; runs 50 ms apart and back to
back) vs pydantic-monty's ``checkout()`` + ``feed_run("1")``, ``subprocess.run([python, "-I",
"-c", ...])`` and smolagents' in-process ``LocalPythonExecutor``; the waterfall of a run;
a nested call round trip (timed in the program, and as a 1,000-call mean) vs the same call
made in-process and vs a Monty external-function call, and the event-loop rounds it takes;
CPU-bound programs in both ptc profiles vs Monty and smolagents (and plain in-process
``exec`` for scale); kill latency; idle pooled child PSS; 20 concurrent runs; the worst
event-loop stall of register, present_as, model_tools, sdk, a tool change and run_code with
200 tools (a heartbeat task), and 200 tools registered one by one vs at once; run_code on a
session holding 64 KiB and 1 MiB of state beside the sessionless paced run, and fork() of
the 1 MiB session (``_latency_sessions``).
Results: ``benchmarks/results/latency.{json,md}``; the performance targets
(docs/benchmarks.md) are checked. Each result carries the host facts that change the figures
(kernel, cgroup version and mount options, virtualisation, CPUs, the load average at the
start and end of the run, Python: ``_host``); with ``--runs N``, every run's targets and
host state side by side in ``latency-runs.{json,md}``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

import ptc

from . import _host, _stats
from ._episodes import runtime_kwargs
from ._floor import FLOOR_NAME, fork_floor
from ._latency_extra import (
    monty_baselines,
    nested_in_program,
    rounds_per_call,
    stalls,
    waterfall,
)
from ._latency_parts import (
    CPU_PROGRAMS,
    cpu_seconds,
    descendant_pss_kib,
    make_smolagents,
    minor_faults,
    sample_async,
    sample_sync,
)
from ._latency_sessions import session_latency

RESULT_NAME = "latency"
CONSTANT = "1"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks latency", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="few repetitions (a smoke run)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every repetition count (default 1: about 2 minutes)")
    parser.add_argument("--relaxed-containment", action="store_true",
                        help="do not require full containment")
    parser.add_argument("--out", type=Path, default=_stats.RESULTS_DIR, help="results directory")
    parser.add_argument("--runs", type=int, default=1,
                        help="run the suite this many times, one after another; the last run "
                             "is latency.{json,md}, every run's targets and host state are "
                             "latency-runs.{json,md} (default 1)")
    return parser


class Bench:
    """Collects named sample sets (milliseconds unless the name says otherwise)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.samples: dict[str, list[float]] = {}
        self.facts: dict[str, Any] = {}

    def n(self, base: int) -> int:
        return max(2, int(base * self.scale))

    def add(self, name: str, samples: list[float]) -> None:
        self.samples[name] = samples
        summary = _stats.summarize(samples)
        _stats.progress(f"{name}: p50 {summary.median:.3f} p99 {summary.p99:.3f} "
                        f"(n={summary.count})")

    def p50(self, name: str) -> float | None:
        return _stats.summarize(self.samples[name]).median if name in self.samples else None


async def _ok(awaitable: Awaitable[Any]) -> Any:
    result = await awaitable
    if result.is_error:
        raise RuntimeError(f"{result.name} failed: {result.error.code}: {result.error.message}")
    return result


async def _run_suite(bench: Bench, relaxed: bool) -> None:
    limits = ptc.Limits(max_calls=5000)
    async with ptc.ToolRuntime(**runtime_kwargs(relaxed), limits=limits) as runtime:

        @runtime.tool(concurrency_safe=True)
        async def noop() -> int:
            """Return 0 (a trivial async tool: the nested-call reference)."""
            return 0

        native = runtime.scope("lat-native")
        native.present_as("native")
        code = runtime.scope("lat-code")
        code.present_as("code")
        restricted = runtime.scope("lat-restricted")
        restricted.present_as("code", profile="restricted")
        killer = runtime.scope("lat-kill")
        killer.present_as("code", limits=ptc.Limits(wall_seconds=0.3))

        await _ok(code.run_code(CONSTANT))  # start the zygote and fill the pool
        first = await _ok(code.run_code(CONSTANT))
        bench.facts["enforcement"] = _plain(first.meta.get("enforcement", {}))

        async def constant() -> None:
            await _ok(code.run_code(CONSTANT))

        bench.add("run_code constant, warm, 50 ms apart",
                  await sample_async(constant, bench.n(150), gap_seconds=0.05))
        before, faults_before = cpu_seconds(), minor_faults()
        back_to_back = bench.n(300)
        bench.add("run_code constant, back to back", await sample_async(constant, back_to_back))
        await anyio.sleep(0.5)  # let the pool refill before reading memory
        used = {k: v - before[k] for k, v in cpu_seconds().items()}
        bench.facts["minor_faults_per_back_to_back_run"] = {
            k: (v - faults_before[k]) / back_to_back for k, v in minor_faults().items()}
        used["other (kernel threads, other processes)"] = used["machine"] - sum(
            v for k, v in used.items() if k != "machine")
        bench.facts["cpu_ms_per_back_to_back_run"] = {
            k: v * 1000 / back_to_back for k, v in used.items()}
        bench.facts["idle_pss_kib"] = descendant_pss_kib()
        bench.facts["waterfall"] = await waterfall(code, bench.n(60), 0.05)
        await session_latency(code, bench.add, bench.facts, bench.n)

        async def in_process() -> None:
            await _ok(native.call("noop", {}))

        bench.add("in-process pipeline call (native scope)",
                  await sample_async(in_process, bench.n(3000)))
        calls = 1000
        program = f"for _ in range({calls}):\n    tools.noop()\n{CONSTANT}"

        async def thousand() -> None:
            await _ok(code.run_code(program))

        bench.add(f"run_code with {calls} sequential nested calls",
                  await sample_async(thousand, bench.n(10)))
        base, loop = bench.p50("run_code constant, back to back"), bench.p50(
            f"run_code with {calls} sequential nested calls")
        if base is not None and loop is not None:
            bench.facts["nested_round_trip_us"] = (loop - base) * 1000 / calls
            bench.facts["nested_calls_per_second"] = calls / ((loop - base) / 1000)
        nested_cpu: dict[str, float] = {}
        bench.add("nested call, timed in the program", await nested_in_program(
            code, max(200, bench.n(2000)), nested_cpu))
        bench.facts["nested_cpu_us_per_call"] = nested_cpu
        bench.facts["event_loop_rounds_per_nested_call"] = await rounds_per_call(code, 1000)

        for label, source in CPU_PROGRAMS.items():
            for profile, scope in (("python", code), ("restricted", restricted)):

                async def cpu(scope: Any = scope, source: str = source) -> None:
                    await _ok(scope.run_code(source))

                bench.add(f"{label}: ptc {profile}", await sample_async(cpu, bench.n(5)))

        async def kill() -> None:
            started = time.perf_counter()
            result = await killer.run_code("while True:\n    pass")
            if not result.is_error:
                raise RuntimeError("an endless loop finished")
            bench.samples.setdefault("kill: returned after deadline", []).append(
                (time.perf_counter() - started - 0.3) * 1000)

        await sample_async(kill, bench.n(8))
        bench.add("kill: returned after deadline", bench.samples["kill: returned after deadline"])

        failures = 0

        async def one(_: int) -> None:
            nonlocal failures
            result = await code.run_code(CONSTANT)
            failures += result.is_error

        async def twenty() -> None:
            async with anyio.create_task_group() as group:
                for i in range(20):
                    group.start_soon(one, i)

        rounds = await sample_async(twenty, bench.n(15))
        bench.add("20 concurrent runs (batch wall)", rounds)
        bench.facts["concurrent_failures"] = failures
        bench.facts["concurrent_runs_per_second"] = 20 * len(rounds) / (sum(rounds) / 1000)


def _baselines(bench: Bench) -> None:
    for name, samples in monty_baselines(bench.n).items():
        bench.add(name, samples)
    floor = fork_floor(bench.n(300))
    bench.add(FLOOR_NAME, floor.pop("wall_ms"))
    bench.facts["floor_per_run"] = floor
    command = [sys.executable, "-I", "-c", CONSTANT]
    bench.add("subprocess python -I -c (same program)",
              sample_sync(lambda: subprocess.run(command, check=True), bench.n(60)))
    executor = make_smolagents({"noop": lambda: 0})
    bench.add("smolagents LocalPythonExecutor constant",
              sample_sync(lambda: executor(CONSTANT), bench.n(300)))
    program = "for _ in range(1000):\n    noop()\n1"
    bench.add("smolagents 1000 in-process calls",
              sample_sync(lambda: executor(program), bench.n(10)))
    for label, source in CPU_PROGRAMS.items():
        def smol(source: str = source) -> None:
            executor(source)

        bench.add(f"{label}: smolagents", sample_sync(smol, bench.n(3)))
        compiled = compile("def _p():\n" + _indent_with_return(source), "<bench>", "exec")

        def plain(compiled: Any = compiled) -> None:
            namespace: dict[str, Any] = {}
            exec(compiled, namespace)
            namespace["_p"]()

        bench.add(f"{label}: in-process exec (no isolation)", sample_sync(plain, bench.n(5)))


def _indent_with_return(source: str) -> str:
    lines = source.strip().splitlines()
    lines[-1] = "return " + lines[-1]
    return "".join(f"    {line}\n" for line in lines)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.runs < 1:
        _parser().error("--runs must be at least 1")
    payloads = []
    for index in range(args.runs):
        # The host's state decides many figures: it is read (and shown) before each run.
        machine = _host.host_facts()
        _stats.progress(f"latency suite, run {index + 1} of {args.runs}, host: "
                        + _host.describe(machine))
        bench = Bench(0.1 if args.quick else args.scale)
        _stats.progress("latency suite: baselines (subprocess, smolagents, in-process exec)")
        _baselines(bench)
        _stats.progress("latency suite: ptc runtime")
        anyio.run(_run_suite, bench, args.relaxed_containment)
        _stats.progress("latency suite: event-loop stalls with 200 tools")
        bench.facts["stalls_ms"] = anyio.run(stalls, 200, args.relaxed_containment)
        machine["load_average_at_end"] = _host.load()
        payloads.append(_write(bench.samples, bench.facts, args.out, machine))
    if args.runs > 1:
        from ._latency_report import render_runs

        markdown, payload = render_runs(payloads)
        json_path, md_path = _stats.write_results(f"{RESULT_NAME}-runs", payload, markdown,
                                                  args.out)
        print(markdown)
        print(f"every run: {json_path} and {md_path}")
    return 0


def _write(samples: dict[str, list[float]], facts: dict[str, Any], out: Path,
           machine: dict[str, Any]) -> dict[str, Any]:
    from ._latency_report import render

    markdown, payload = render(samples, facts, machine)
    payload["machine"] = machine
    json_path, md_path = _stats.write_results(RESULT_NAME, payload, markdown, out)
    print(markdown)
    print(f"results: {json_path} and {md_path}")
    return payload


Sampler = Callable[[], Awaitable[None]]

if __name__ == "__main__":
    raise SystemExit(main())
