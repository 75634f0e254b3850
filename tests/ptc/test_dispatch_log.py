"""A run's dispatch log (``ptc._code._dispatch_log``) past its limit: the first entries in full,
the rest counted by tool and error code, and the model told so (in-process fake worker)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

import ptc
from ptc._code._dispatch_log import DISPATCH_LOG_ENTRIES
from tests._backends import anyio_backend  # noqa: F401 - both anyio backends
from tests._typing import data
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio

CALLS = DISPATCH_LOG_ENTRIES + 200


@pytest.fixture
async def rt() -> AsyncIterator[ptc.ToolRuntime]:
    limits = ptc.Limits(max_calls=2 * CALLS, wall_seconds=60)
    async with ptc.ToolRuntime(
        default_mode="code",
        backend=FakeBackend(),
        containment=ptc.Containment(require=frozenset()),
        limits=limits,
    ) as runtime:

        @runtime.tool(concurrency_safe=True)
        async def echo(i: int) -> int:
            """Return i; the last five calls fail."""
            if i >= CALLS - 5:
                raise ValueError("too far")
            return i

        @runtime.tool(concurrency_safe=True)
        async def other() -> str:
            """Return a constant."""
            return "x"

        yield runtime


PROGRAM = f"""
try:
    tools.echo.map([{{'i': i}} for i in range({CALLS})])
except ToolCallError as e:
    failed = e.code
tools.other.map([{{}}] * 7)
return failed
"""


async def test_past_the_limit_calls_are_counted_by_tool_and_error(rt: ptc.ToolRuntime) -> None:
    seen: list[str] = []

    async def listener(entry: ptc.DispatchLogEntry, next: Any) -> Sequence[Any]:
        seen.append(entry.sub_call_id)
        content: Sequence[Any] = await next(entry)
        return content

    rt.on("tools/ptc-dispatch-log", listener)
    result = await rt.root.run_code(PROGRAM)
    assert data(result.value)["result"] == "TOOL_ERROR"
    meta: Any = result.meta
    assert len(meta["dispatch_log"]) == DISPATCH_LOG_ENTRIES
    assert meta["dispatch_log"][-1]["sub_call_id"].endswith(f":ptc:{DISPATCH_LOG_ENTRIES}")
    assert meta["dispatch_log_summary"] == {
        "limit": DISPATCH_LOG_ENTRIES,
        "calls": CALLS + 7,
        "omitted": CALLS + 7 - DISPATCH_LOG_ENTRIES,
        "omitted_by_tool": {
            "echo": {"calls": CALLS - DISPATCH_LOG_ENTRIES, "errors": {"TOOL_ERROR": 5}},
            "other": {"calls": 7, "errors": {}},
        },
    }
    assert len(seen) == CALLS + 7  # the waterfall still sees every call
    text = data(result.content[0])["text"]
    assert text.endswith(
        f"[ptc: this run made {CALLS + 7} tool calls; the host's dispatch log keeps the "
        f"first {DISPATCH_LOG_ENTRIES} and counts the other {CALLS + 7 - DISPATCH_LOG_ENTRIES}"
        " by tool]"
    )
    assert text.startswith("TOOL_ERROR\n")


async def test_a_failed_run_says_so_after_its_message(rt: ptc.ToolRuntime) -> None:
    program = PROGRAM.replace("return failed", "raise RuntimeError('after the calls')")
    result = await rt.root.run_code(program)
    assert result.error is not None and result.error.code == "CODE_RUN_FAILED"
    assert "RuntimeError: after the calls" in result.error.message
    assert result.error.message.endswith("counts the other 207 by tool]")


async def test_a_run_within_the_limit_has_no_summary(rt: ptc.ToolRuntime) -> None:
    result = await rt.root.run_code("return tools.echo.map([{'i': i} for i in range(10)])")
    assert "dispatch_log_summary" not in result.meta
    assert len(data(result.meta)["dispatch_log"]) == 10
    assert "[ptc:" not in data(result.content[0])["text"]
