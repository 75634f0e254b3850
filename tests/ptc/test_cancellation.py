"""Cancelling the caller's task (DESIGN section 14): the call ends as ``ABORTED``, its
``tools/result`` is still emitted, and so is that of every nested call the run started, so
an event log never holds a child without a parent; the cancellation still reaches the
caller. Every framework cancels a tool this way (anyio cancellation of the awaiting task),
so it is tested on both of anyio's backends, with a real :class:`ptc.EventLog`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc
from ptc._observe._calltree import read_records
from tests._backends import anyio_backend  # noqa: F401 - both anyio backends
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio

GUARD_SECONDS = 10


class Stuck:
    """A tool body that says it entered, then waits until it is cancelled."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.saw_signal: list[bool] = []

    async def __call__(self, context: ptc.ToolContext) -> int:
        self.entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.saw_signal.append(context.signal.cancelled)
        raise AssertionError("unreachable")


async def cancel_once(started: anyio.Event, call: Callable[[], Awaitable[Any]]) -> list[str]:
    """Run ``call`` in a task, cancel that task once ``started`` is set, and say what the
    task saw: ``"cancelled"`` when the cancellation reached it, ``"returned"`` if not."""
    seen: list[str] = []

    async def caller() -> None:
        try:
            await call()
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise
        seen.append("returned")

    with anyio.fail_after(GUARD_SECONDS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(caller)
            await started.wait()
            tg.cancel_scope.cancel()  # the calling task: no signal is involved
    return seen


def calls_of(path: Path) -> dict[str, dict[str, Any]]:
    return {r["call_id"]: r for r in read_records(path) if r["event"] == "call"}


def assert_every_parent_logged(calls: dict[str, dict[str, Any]]) -> None:
    orphans = {cid: r["parent_call_id"] for cid, r in calls.items()}
    orphans = {cid: p for cid, p in orphans.items() if p is not None and p not in calls}
    assert not orphans, f"children without a parent record: {orphans}"


async def code_runtime(log: ptc.EventLog, worker: str = "fake", **options: Any) -> ptc.ToolRuntime:
    if worker == "fake":
        options["backend"] = FakeBackend()
        options["containment"] = ptc.Containment(require=frozenset())
    runtime = ptc.ToolRuntime(default_mode="code", **options)
    log.attach(runtime)
    return runtime


WORKERS = ["fake", pytest.param("subprocess", marks=pytest.mark.needs_root)]


@pytest.mark.parametrize("worker", WORKERS)
async def test_a_cancelled_run_code_is_aborted_with_its_started_nested_calls(
    tmp_path: Path, worker: str
) -> None:
    path = tmp_path / "events.jsonl"
    log = ptc.EventLog(path)
    stuck = Stuck()
    results: list[ptc.ToolResult] = []
    async with await code_runtime(log, worker) as runtime:

        @runtime.tool
        def fast() -> str:
            """Returns at once."""
            return "ok"

        @runtime.tool
        async def stuck_tool(context: ptc.ToolContext) -> int:
            """Waits until cancelled."""
            return await stuck(context)

        runtime.on("tools/result", results.append)
        await runtime.root.prepare()
        program = "tools.fast()\ntools.stuck_tool()\nreturn 1"
        seen = await cancel_once(
            stuck.entered, lambda: runtime.root.run_code(program, call_id="outer")
        )
    log.close()

    assert seen == ["cancelled"]
    assert stuck.saw_signal == [True]  # the nested call's signal fired before the cancellation
    calls = calls_of(path)
    assert set(calls) == {"outer", "outer:ptc:1", "outer:ptc:2"}
    assert calls["outer:ptc:1"]["error_code"] is None
    assert calls["outer:ptc:2"]["error_code"] == "ABORTED"
    assert calls["outer"]["error_code"] == "ABORTED"
    assert calls["outer"]["tool"] == "run_code"
    assert_every_parent_logged(calls)
    # The parent's record comes after its children's: it ends last.
    assert [r.call_id for r in results] == ["outer:ptc:1", "outer:ptc:2", "outer"]
    outer = results[-1]
    assert outer.error is not None and "cancelled" in outer.error.message


async def test_a_cancelled_run_code_ends_a_pending_ask_as_ask_cancelled(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = ptc.EventLog(path)
    asked = anyio.Event()

    async def approver(request: ptc.ApprovalRequest) -> ptc.ApprovalAnswer:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with await code_runtime(log, approver=approver) as runtime:

        @runtime.tool
        def risky() -> str:
            """Needs a person's approval."""
            return "done"

        async def ask(execution: ptc.ToolExecution, nxt: Any) -> Any:
            return ptc.Ask("sure?") if execution.name == "risky" else await nxt()

        runtime.on("tools/pre-execute", ask)
        await runtime.root.prepare()
        seen = await cancel_once(
            asked, lambda: runtime.root.run_code("return tools.risky()", call_id="outer")
        )
    log.close()

    assert seen == ["cancelled"]
    calls = calls_of(path)
    assert {cid: r["error_code"] for cid, r in calls.items()} == {
        "outer:ptc:1": "ASK_CANCELLED",
        "outer": "ABORTED",
    }


async def test_a_cancelled_direct_call_is_aborted_and_emitted(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = ptc.EventLog(path)
    stuck = Stuck()
    async with ptc.ToolRuntime() as runtime:
        log.attach(runtime)

        @runtime.tool
        async def stuck_tool(context: ptc.ToolContext) -> int:
            """Waits until cancelled."""
            return await stuck(context)

        seen = await cancel_once(
            stuck.entered, lambda: runtime.root.call("stuck_tool", {}, call_id="direct")
        )
    log.close()

    assert seen == ["cancelled"]
    assert {cid: r["error_code"] for cid, r in calls_of(path).items()} == {"direct": "ABORTED"}


async def test_a_cancelled_call_many_emits_its_started_calls_only(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = ptc.EventLog(path)
    stuck = [Stuck(), Stuck()]
    both = anyio.Event()

    async def enter(index: int, context: ptc.ToolContext) -> int:
        if all(s.entered.is_set() for s in stuck if s is not stuck[index]):
            both.set()
        return await stuck[index](context)

    async with ptc.ToolRuntime() as runtime:
        log.attach(runtime)

        @runtime.tool(concurrency_safe=True)
        async def stuck0(context: ptc.ToolContext) -> int:
            """Waits until cancelled."""
            return await enter(0, context)

        @runtime.tool(concurrency_safe=True)
        async def stuck1(context: ptc.ToolContext) -> int:
            """Waits until cancelled."""
            return await enter(1, context)

        @runtime.tool
        def last() -> str:
            """An exclusive call after the parallel pair: never starts."""
            return "never"

        batch = [
            ptc.ToolCall("stuck0", {}, call_id="a"),
            ptc.ToolCall("stuck1", {}, call_id="b"),
            ptc.ToolCall("last", {}, call_id="c"),
        ]
        seen = await cancel_once(both, lambda: runtime.root.call_many(batch))
    log.close()

    assert seen == ["cancelled"]
    assert {cid: r["error_code"] for cid, r in calls_of(path).items()} == {
        "a": "ABORTED",
        "b": "ABORTED",
    }
