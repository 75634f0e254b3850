"""Big batches end to end with REAL contained workers: a 20,000-call ``.map`` completes,
its dispatch log is summarised, and the host holds no object per call for the garbage
collector to scan while the batch runs, and nothing of it after (counted, never timed).
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from typing import Any

import pytest

import ptc
from ptc._code._dispatch_log import DISPATCH_LOG_ENTRIES
from tests._backends import ANYIO_BACKENDS
from tests._typing import data

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root, pytest.mark.slow]

CALLS = 20_000


@pytest.fixture(scope="module", params=ANYIO_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both of anyio's backends: asyncio reads frames in the loop's reader callback,
    trio in the run's task."""
    backend: str = request.param
    return backend


class Counts:
    """Objects the garbage collector tracks, counted when the batch's last call runs."""

    at_last_call = 0


@pytest.fixture(scope="module")
async def rt() -> AsyncIterator[ptc.ToolRuntime]:
    limits = ptc.Limits(max_calls=CALLS, wall_seconds=110, cpu_seconds=110)
    async with ptc.ToolRuntime(default_mode="code", limits=limits) as runtime:

        @runtime.tool(concurrency_safe=True)
        async def echo(i: int) -> int:
            """Return i; the last ten calls fail."""
            if i == CALLS - 1:
                gc.collect()
                Counts.at_last_call = len(gc.get_objects())
            if i >= CALLS - 10:
                raise ValueError("too far")
            return i

        yield runtime


PROGRAM = f"""
try:
    tools.echo.map([{{'i': i}} for i in range({CALLS})])
except ToolCallError as e:
    return [e.code, e.message]
"""


async def test_a_20000_call_map_completes_and_its_dispatch_log_is_summarised(
    rt: ptc.ToolRuntime,
) -> None:
    await rt.root.run_code("return 1")  # the zygote and the pool are up
    gc.collect()
    before = len(gc.get_objects())
    result = await rt.root.run_code(PROGRAM)
    assert data(result.value)["result"] == ["TOOL_ERROR", "too far"]
    meta: Any = result.meta
    assert meta["stats"]["calls"] == CALLS
    assert len(meta["dispatch_log"]) == DISPATCH_LOG_ENTRIES
    assert meta["dispatch_log_summary"] == {
        "limit": DISPATCH_LOG_ENTRIES,
        "calls": CALLS,
        "omitted": CALLS - DISPATCH_LOG_ENTRIES,
        "omitted_by_tool": {
            "echo": {"calls": CALLS - DISPATCH_LOG_ENTRIES, "errors": {"TOOL_ERROR": 10}}
        },
    }
    assert data(result.content[0])["text"].endswith("counts the other 19000 by tool]")
    # While the batch ran, its calls left the garbage collector nothing to scan (requests
    # and replies in columns of plain values, results dropped as each call ended): what
    # the host held was the dispatch log's first entries (4 objects each), not objects
    # per call (7 each before, 140,000 here).
    held = Counts.at_last_call - before
    assert held < CALLS // 2, (before, Counts.at_last_call)
    del result, meta
    gc.collect()
    assert len(gc.get_objects()) - before <= 2000  # nothing of the batch stays behind
