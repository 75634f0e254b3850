"""The latency suite's newer parts: pydantic-monty, the waterfall of a run, event-loop
stalls (a heartbeat), event-loop rounds per nested call, per-call nested timings.

Everything here measures from outside: the waterfall uses the debug-only timing hook
(``worker.set_timing_hook``), installed only around the sampled runs; rounds are counted
by wrapping the running loop's ``_run_once`` for one program; stalls by a task that sleeps
1 ms in a loop and records its worst lateness (and, beside it, the longest full garbage
collection that ran meanwhile: it holds the GIL in whichever thread it runs).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel

import ptc
import worker

from . import _stats

WATERFALL_STEPS = (
    ("pre-flight", "preflight"),
    ("checkout", "checkout"),
    ("start frame", "start"),
    ("program (child: SDK module pre-loaded, run, done)", "done"),
    ("done -> end of stream", "eof"),
    ("result (release, outcome, pipeline finish)", "end"),
)


# --- pydantic-monty ---------------------------------------------------------------------


def monty_baselines(n: Callable[[int], int]) -> dict[str, list[float]]:
    """Monty's constant run (back to back and 50 ms apart), an external-function call
    (mean over a 1,000-call program) and the CPU loop, in ms."""
    import pydantic_monty

    out: dict[str, list[float]] = {}

    def add(a: int, b: int) -> int:
        return a + b

    with pydantic_monty.Monty(min_processes=2) as pool:
        for _ in range(20):
            with pool.checkout() as session:
                session.feed_run("1")

        def constant() -> float:
            started = time.perf_counter()
            with pool.checkout() as session:
                session.feed_run("1")
            return (time.perf_counter() - started) * 1000

        out["monty constant, back to back"] = [constant() for _ in range(n(300))]
        paced = []
        for _ in range(n(150)):
            time.sleep(0.05)
            paced.append(constant())
        out["monty constant, 50 ms apart"] = paced
        calls = "total = 0\nfor i in range(1000):\n    total = add(total, 1)\ntotal"
        per_call = []
        for _ in range(n(10)):
            with pool.checkout() as session:
                started = time.perf_counter()
                session.feed_run("1")
                base = time.perf_counter() - started
                started = time.perf_counter()
                session.feed_run(calls, external_lookup={"add": add})
                loop = time.perf_counter() - started
            per_call.append((loop - base) * 1000 / 1000)
        out["monty external call (mean of 1000)"] = per_call
        cpu = []
        for _ in range(n(3)):
            with pool.checkout() as session:
                started = time.perf_counter()
                session.feed_run("total = 0\nfor i in range(1, 1000001):\n    total += i\ntotal")
                cpu.append((time.perf_counter() - started) * 1000)
        out["sum 1..10^6 loop: monty"] = cpu
    return out


# --- the waterfall ----------------------------------------------------------------------


async def waterfall(scope: ptc.Scope, count: int, gap_seconds: float) -> dict[str, Any]:
    """Median time per step of ``run_code("1")`` (ms), from the timing hook's marks; the
    teardown of each run's child, which happens after the run returned, beside them."""
    steps: dict[str, list[float]] = {label: [] for label, _ in WATERFALL_STEPS}
    teardown: list[float] = []
    inline_sdk = 0
    for _ in range(count):
        await anyio.sleep(gap_seconds)
        marks: list[tuple[str, float]] = []
        worker.set_timing_hook(functools.partial(_record, marks))
        try:
            started = time.perf_counter()
            result = await scope.run_code("1")
            ended = time.perf_counter()
            await anyio.sleep(0.02)  # let the background teardown pass its mark
        finally:
            worker.set_timing_hook(None)
        if result.is_error:
            raise RuntimeError(f"run_code failed: {result.content}")
        at = dict(marks)
        at["end"] = ended
        previous = started
        for label, mark in WATERFALL_STEPS:
            if mark in at:
                steps[label].append((at[mark] - previous) * 1000)
                previous = at[mark]
        if "teardown" in at and "returned" in at:
            teardown.append((at["teardown"] - at["returned"]) * 1000)
        inline_sdk += "sdk-inline" in at
    medians = {label: statistics.median(v) for label, v in steps.items() if v}
    return {
        "steps_ms": medians,
        "teardown_after_return_ms": statistics.median(teardown) if teardown else None,
        "runs": count,
        "runs_with_the_sdk_module_in_start": inline_sdk,
    }


def _record(marks: list[tuple[str, float]], name: str) -> None:
    marks.append((name, time.perf_counter()))


# --- nested calls -----------------------------------------------------------------------


async def rounds_per_call(scope: ptc.Scope, calls: int) -> float:
    """Event-loop iterations per nested call: a ``calls``-call program minus a constant one."""
    loop = asyncio.get_running_loop()
    original = loop._run_once  # type: ignore[attr-defined]
    count = 0

    def counting() -> None:
        nonlocal count
        count += 1
        original()

    program = f"for _ in range({calls}):\n    tools.noop()\n1"
    loop._run_once = counting  # type: ignore[attr-defined]
    try:
        await scope.run_code("1")
        base, count = count, 0
        await scope.run_code(program)
    finally:
        loop._run_once = original  # type: ignore[attr-defined]
    return (count - base) / calls


NESTED_TIMED = """
import time
laps = []
cpu = time.process_time()
for i in range({n}):
    t = time.perf_counter()
    tools.noop()
    laps.append((time.perf_counter() - t) * 1000)
[laps, time.process_time() - cpu]
"""


async def nested_in_program(
    scope: ptc.Scope, calls: int, cpu_us: dict[str, float] | None = None
) -> list[float]:
    """Each nested call's round trip (ms), timed inside the program around the SDK call;
    ``cpu_us`` gets the CPU per call of the child (its own clock, around the loop) and of
    the host (this process, user and system, around the whole run: a run's own cost
    spread over the calls adds a few µs)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = await scope.run_code(NESTED_TIMED.format(n=calls))
    after = resource.getrusage(resource.RUSAGE_SELF)
    value = result.value
    out = value.get("result") if isinstance(value, dict) else None
    if result.is_error or not isinstance(out, list) or len(out) != 2:
        raise RuntimeError(f"nested timing run failed: {result.content}")
    laps, child_cpu = out
    if not isinstance(laps, list) or not isinstance(child_cpu, int | float):
        raise RuntimeError(f"nested timing run returned {str(out)[:200]}")
    if cpu_us is not None:
        host = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        cpu_us["host"] = host / calls * 1e6
        cpu_us["host_system"] = (after.ru_stime - before.ru_stime) / calls * 1e6
        cpu_us["child"] = float(child_cpu) / calls * 1e6
    return [float(x) for x in laps if isinstance(x, int | float)]


# --- event-loop stalls ------------------------------------------------------------------


class FullCollections:
    """The longest full (generation 2) garbage collection while the block runs, in ms."""

    def __init__(self) -> None:
        self.longest_ms = 0.0
        self._started: dict[int, float] = {}

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        key = threading.get_ident()
        if phase == "start":
            self._started[key] = time.perf_counter()
        elif key in self._started:
            pause = (time.perf_counter() - self._started.pop(key)) * 1000
            self.longest_ms = max(self.longest_ms, pause)


async def worst_stall_ms(action: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """The worst lateness (ms) of a task sleeping 1 ms in a loop while ``action`` runs, and
    the longest full garbage collection meanwhile (ms; 0: none)."""
    worst = 0.0
    done = False

    async def heartbeat() -> None:
        nonlocal worst
        while not done:
            started = time.perf_counter()
            await anyio.sleep(0.001)
            worst = max(worst, (time.perf_counter() - started - 0.001) * 1000)

    with FullCollections() as collections:
        async with anyio.create_task_group() as group:
            group.start_soon(heartbeat)
            await anyio.sleep(0.01)
            try:
                await action()
            finally:
                await anyio.sleep(0.005)
                done = True
    return worst, collections.longest_ms


def _tools(prefix: str, count: int) -> list[ptc.ToolDefinition]:
    async def body(arguments: Any, context: Any) -> Any:
        return dict(arguments)

    return [
        ptc.define_tool(
            name=f"{prefix}_{i:03}",
            description=f"Tool {i} of the stall benchmark.",
            input_schema={
                "type": "object",
                "properties": {
                    "q": {"type": "string", "description": "query"},
                    "n": {"type": "integer", "minimum": i},
                    f"k{i}": {"type": "array", "items": {"type": "number"}},
                },
                "required": ["q"],
            },
            output=ptc.Output(
                {"type": "object", "properties": {f"r{i}": {"type": "string"}}},
                lambda value: [{"type": "text", "text": str(value)}],
            ),
            execute=body,
            concurrency_safe=True,
        )
        for i in range(count)
    ]


FLOOR = "nothing (the heartbeat alone, 100 ms)"


async def stalls(count: int, relaxed: bool) -> dict[str, Any]:
    """Worst event-loop stall (ms) of each host operation with ``count`` tools, on a cold
    SDK cache (a fresh cache directory), and register one by one vs at once (wall ms);
    ``full_gc_ms``: per operation, the longest full garbage collection during it. The
    first row, :data:`FLOOR`, is the heartbeat while the host does nothing: on a busy
    machine it is not zero, and the other rows read against it."""
    out: dict[str, Any] = {}
    collections: dict[str, float] = {}

    async def measure(name: str, action: Callable[[], Awaitable[object]]) -> None:
        out[name], collections[name] = await worst_stall_ms(action)

    containment = ptc.Containment(require=frozenset()) if relaxed else ptc.Containment()
    previous = os.environ.get("PTC_CACHE_DIR")
    try:
        with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
            os.environ["PTC_CACHE_DIR"] = one
            async with ptc.ToolRuntime(default_mode="code", containment=containment) as rt:
                tools = _tools("a", count)
                # The floor: what the machine alone does to the heartbeat (not a target).
                await measure(FLOOR, functools.partial(anyio.sleep, 0.1))

                async def one_by_one() -> None:
                    for definition in tools:
                        rt.register(definition)
                        await anyio.lowlevel.checkpoint()
                    await rt.root.prepare()

                started = time.perf_counter()
                await measure("register (one by one, then prepare)", one_by_one)
                out["register_one_by_one_ms"] = (time.perf_counter() - started) * 1000
                await measure("model_tools", _sync(rt.root.model_tools))

                async def sdk() -> None:
                    # In search discovery (200 tools here) prepare() only starts the full
                    # stub: a host on the loop awaits it, then sdk() answers at once.
                    await rt.root.sdk_async()
                    rt.root.sdk()

                await measure("sdk", sdk)
                agent = rt.scope("agent")

                async def present() -> None:
                    agent.present_as("code", profile="restricted")
                    await agent.prepare()

                await measure("present_as (then prepare)", present)

                async def tool_change() -> None:
                    rt.register(_tools("late", 1)[0])
                    await rt.root.prepare()

                await measure("a tool change (then prepare)", tool_change)

                async def run() -> None:
                    result = await rt.root.run_code("return tools.a_007(q='x')")
                    if result.is_error:
                        raise RuntimeError(f"run_code failed: {result.content}")

                await run()  # start the zygote and the pool
                await measure("run_code", run)
            os.environ["PTC_CACHE_DIR"] = two
            async with ptc.ToolRuntime(default_mode="code", containment=containment) as rt:
                tools = _tools("b", count)

                async def at_once() -> None:
                    for definition in tools:
                        rt.register(definition)
                    await rt.root.prepare()

                started = time.perf_counter()
                await measure("register (all at once, then prepare)", at_once)
                out["register_at_once_ms"] = (time.perf_counter() - started) * 1000
    finally:
        if previous is None:
            os.environ.pop("PTC_CACHE_DIR", None)
        else:
            os.environ["PTC_CACHE_DIR"] = previous
    out["full_gc_ms"] = collections
    _stats.progress(f"stalls: {out}")
    return out


def _sync(fn: Callable[[], object]) -> Callable[[], Awaitable[object]]:
    async def call() -> object:
        return fn()

    return call
