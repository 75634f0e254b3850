"""Per-call overhead of each framework adapter against the framework's own plain function
tool: the same trivial async tool (``add``), called through the framework's tool-call path,
once as the framework's function tool and once as a ptc tool through the adapter (the
whole ptc pipeline: validation, policy, render, the result event).

``python -m benchmarks.integrations_bench [--calls N]`` writes
``benchmarks/results/integrations.json`` and ``.md``. Calls alternate between the two
tools so load from elsewhere hits both alike; the machine's load average is recorded
before and after (the figures are only as quiet as the machine was).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

import ptc

from . import _stats

Invoke = Callable[[], Awaitable[Any]]


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def add_text(a: int, b: int) -> str:
    """Add two integers (the Anthropic SDK's tools return text or content blocks)."""
    return str(a + b)


async def _pydantic_ai(scope: ptc.Scope) -> tuple[Invoke, Invoke]:
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    from ptc.integrations import pydantic_ai

    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage(), tool_call_id="c1")
    plain = FunctionToolset([add])
    ours = pydantic_ai.toolset(scope)
    plain_tool = (await plain.get_tools(ctx))["add"]
    our_tool = (await ours.get_tools(ctx))["add"]
    args = {"a": 1, "b": 2}
    return (
        lambda: plain.call_tool("add", args, ctx, plain_tool),
        lambda: ours.call_tool("add", args, ctx, our_tool),
    )


async def _openai_agents(scope: ptc.Scope) -> tuple[Invoke, Invoke]:
    from agents import FunctionTool, function_tool
    from agents.tool_context import ToolContext

    from ptc.integrations import openai_agents

    plain = function_tool(add)
    (ours,) = openai_agents.function_tools(scope)
    assert isinstance(ours, FunctionTool)
    raw = '{"a": 1, "b": 2}'
    ctx = ToolContext(context=None, tool_name="add", tool_call_id="c1", tool_arguments=raw)
    return lambda: plain.on_invoke_tool(ctx, raw), lambda: ours.on_invoke_tool(ctx, raw)


async def _langchain(scope: ptc.Scope) -> tuple[Invoke, Invoke]:
    from langchain_core.tools import StructuredTool

    from ptc.integrations import langchain

    plain = StructuredTool.from_function(coroutine=add)
    (ours,) = langchain.tools(scope)
    call = {"name": "add", "args": {"a": 1, "b": 2}, "id": "c1", "type": "tool_call"}
    return lambda: plain.ainvoke(call), lambda: ours.ainvoke(call)


async def _anthropic(scope: ptc.Scope) -> tuple[Invoke, Invoke]:
    from anthropic.lib.tools import beta_async_tool

    from ptc.integrations import anthropic

    plain = beta_async_tool(add_text)
    (ours,) = anthropic.tools(scope)
    args = {"a": 1, "b": 2}
    return lambda: plain.call(args), lambda: ours.call(args)


FRAMEWORKS = {
    "pydantic-ai": _pydantic_ai,
    "openai-agents": _openai_agents,
    "langchain": _langchain,
    "anthropic": _anthropic,
}


async def measure(calls: int) -> list[dict[str, Any]]:
    rows = []
    async with ptc.ToolRuntime() as runtime:
        runtime.register(ptc.tool(add))
        scope = runtime.scope("bench")
        scope.present_as("native")
        for name, build in FRAMEWORKS.items():
            plain, ours = await build(scope)
            for _ in range(200):  # warm-up
                await plain()
                await ours()
            plain_us: list[float] = []
            ours_us: list[float] = []
            clock = time.perf_counter_ns
            for _ in range(calls):
                start = clock()
                await plain()
                plain_us.append((clock() - start) / 1000)
                start = clock()
                await ours()
                ours_us.append((clock() - start) / 1000)
            p, o = _stats.summarize(plain_us), _stats.summarize(ours_us)
            rows.append({
                "framework": name, "calls": calls,
                "plain_us": p.as_dict(), "ptc_us": o.as_dict(),
                "overhead_us_p50": o.median - p.median,
            })
            _stats.progress(f"{name}: plain {p.median:.1f} us, ptc {o.median:.1f} us (p50)")
    return rows


def render(rows: Sequence[dict[str, Any]], load: dict[str, Any]) -> str:
    header = ["Framework", "Plain tool p50 us", "p99", "ptc adapter p50 us", "p99",
              "Overhead p50 us"]
    table = [[r["framework"], r["plain_us"]["median"], r["plain_us"]["p99"],
              r["ptc_us"]["median"], r["ptc_us"]["p99"], r["overhead_us_p50"]] for r in rows]
    return (
        "# Framework adapters: per-call overhead against the framework's plain tool\n\n"
        + _stats.markdown_table(header, table)
        + f"\n{rows[0]['calls']:,} calls each, alternating. Load average (1, 5, 15 min) before: "
        f"{load['before']}, after: {load['after']} on {os.cpu_count()} cores.\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.integrations_bench")
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--out", default=str(_stats.RESULTS_DIR))
    args = parser.parse_args(argv)
    before = [round(x, 2) for x in os.getloadavg()]
    rows = anyio.run(measure, args.calls)
    load = {"before": before, "after": [round(x, 2) for x in os.getloadavg()]}
    markdown = render(rows, load)
    payload = {"machine": {**_stats.machine_facts(), "loadavg": load}, "rows": rows}
    from pathlib import Path

    paths = _stats.write_results("integrations", payload, markdown, Path(args.out))
    print(markdown)
    print(f"results: {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
