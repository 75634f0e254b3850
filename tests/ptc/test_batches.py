"""A run's batches of nested calls (``ptc._code._batches``) on the in-process fake worker:
numbering in submission order across concurrent batches, paced loops, big batches.

Pacing is proven by counting turns of the event loop with the slice set to nothing, never
by timing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import ptc
import worker._host._pacing
from tests._backends import anyio_backend  # noqa: F401 - both anyio backends
from tests._typing import data
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio


@pytest.fixture
async def rt() -> AsyncIterator[ptc.ToolRuntime]:
    limits = ptc.Limits(max_calls=5000, wall_seconds=60)
    async with ptc.ToolRuntime(
        default_mode="code",
        backend=FakeBackend(),
        containment=ptc.Containment(require=frozenset()),
        limits=limits,
    ) as runtime:

        @runtime.tool(concurrency_safe=True)
        async def echo(i: int) -> int:
            """Return i."""
            return i

        @runtime.tool
        async def one_at_a_time(i: int) -> int:
            """Return i (an exclusive tool)."""
            return i

        yield runtime


def numbers_by_argument(results: list[ptc.ToolResult]) -> dict[int, int]:
    """Each nested call's ``i`` -> its number ``n`` of ``<outer>:ptc:<n>``."""
    return {
        data(r.value): int(r.call_id.rpartition(":")[2])
        for r in results
        if r.name in ("echo", "one_at_a_time")
    }


THREADED = """
import threading
out = {}
def go(k):
    out[str(k)] = sum(tools.echo.map([{'i': k * 1000 + j} for j in range(300)]))
threads = [threading.Thread(target=go, args=(k,)) for k in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
return out
"""


async def test_concurrent_batches_are_numbered_one_after_another(
    rt: ptc.ToolRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slice of nothing: numbering a batch yields after every call, so batches that came
    # together would interleave their numbers if each did not wait for its turn.
    monkeypatch.setattr(worker._host._pacing, "SLICE_SECONDS", 0.0)
    results: list[ptc.ToolResult] = []
    rt.on("tools/result", results.append)
    result = await rt.root.run_code(THREADED)
    assert not result.is_error, result.content
    numbers = numbers_by_argument(results)
    assert sorted(numbers.values()) == list(range(1, 901))
    for k in range(3):
        mine = [numbers[k * 1000 + j] for j in range(300)]
        assert mine == list(range(mine[0], mine[0] + 300))  # contiguous, in order


@pytest.mark.parametrize("tool", ["echo", "one_at_a_time"])
async def test_every_loop_over_a_batch_lets_the_event_loop_run(
    rt: ptc.ToolRuntime, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    # Async bodies that never wait: an exclusive one ends without an event-loop round,
    # and only the pacing lets other tasks in (counted with a slice of nothing).
    monkeypatch.setattr(worker._host._pacing, "SLICE_SECONDS", 0.0)
    ticks = 0
    done = False

    async def heartbeat() -> None:
        nonlocal ticks
        while not done:
            await anyio.lowlevel.checkpoint()
            ticks += 1

    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        program = f"return sum(tools.{tool}.map([{{'i': i}} for i in range(2000)]))"
        result = await rt.root.run_code(program)
        done = True
    assert data(result.value)["result"] == sum(range(2000))
    assert ticks >= 2000


async def test_a_big_batch_is_answered_in_order_and_logged_in_submission_order(
    rt: ptc.ToolRuntime,
) -> None:
    result = await rt.root.run_code("return tools.echo.map([{'i': i} for i in range(1500)])")
    assert data(result.value)["result"] == list(range(1500))
    log: Any = result.meta["dispatch_log"]
    assert [e["sub_call_id"].rpartition(":")[2] for e in log] == [str(n) for n in range(1, 1001)]
    assert data(result.meta)["stats"]["calls"] == 1500


async def test_calls_one_at_a_time_and_in_one_batch_leave_the_same_records(
    rt: ptc.ToolRuntime,
) -> None:
    """A batch of one call takes a shorter way (no columns, no pacers): its numbering,
    results, dispatch-log records and events are those of the same calls in one batch."""

    @rt.tool(concurrency_safe=True)
    async def picky(i: int) -> int:
        """Return i, but fail on 3."""
        if i == 3:
            raise ValueError("three")
        return i

    events: list[ptc.ToolResult] = []
    rt.on("tools/result", events.append)

    def nested(result: ptc.ToolResult) -> list[Any]:
        log: Any = result.meta["dispatch_log"]
        outer = result.call_id
        records = [
            {k: v for k, v in entry.items() if k != "duration_ms"} | {"n": entry["sub_call_id"]}
            for entry in log
        ]
        for record in records:
            assert record.pop("sub_call_id").startswith(f"{outer}:ptc:")
            record["n"] = record["n"].removeprefix(f"{outer}:ptc:")
        seen = sorted(
            (e.call_id.removeprefix(f"{outer}:ptc:"), e.is_error, e.content)
            for e in events
            if e.name == "picky"
        )
        events.clear()
        return [records, seen, data(result.value)["result"]]

    one_by_one_run = await rt.root.run_code(
        "out = []\n"
        "for i in range(5):\n"
        "    try:\n"
        "        out.append(tools.picky(i=i))\n"
        "    except Exception as exc:\n"
        "        out.append(type(exc).__name__)\n"
        "catalog.search('picky', limit=1)\n"
        "return out"
    )
    one_by_one = nested(one_by_one_run)
    batched_run = await rt.root.run_code(
        "import asyncio\n"
        "calls = [tools.picky(i=i) for i in range(5)]\n"
        "out = await asyncio.gather(*calls, return_exceptions=True)\n"
        "await catalog.search('picky', limit=1)\n"
        "return [type(x).__name__ if isinstance(x, Exception) else x for x in out]"
    )
    assert one_by_one == nested(batched_run)
    log: Any = one_by_one_run.meta["dispatch_log"]
    assert [e["sub_call_id"].rpartition(":")[2] for e in log] == ["1", "2", "3", "4", "5"]
    assert log[3]["error_code"] == "TOOL_ERROR"
