"""Scheduling: groups, barriers, the cap, order, aborts, and one Scheduler across batches.

Overlap is proven with anyio.Event handshakes and recorded event logs, never by timing;
``fail_after`` only turns a would-be deadlock into a failure.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

import ptc
from ptc._calls._pipeline import Call
from ptc._calls._scheduler import Scheduler
from ptc._scopes._scope import call_site
from tests._backends import anyio_backend  # noqa: F401 - both anyio backends

from .helpers import echo_tool, noted, recorder

pytestmark = pytest.mark.anyio


def code(result: ptc.ToolResult) -> str | None:
    return result.error.code if result.error else None


class Recorder:
    """A tool whose body logs start/end and waits for its own gate."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.gates: dict[str, anyio.Event] = {}
        self.started: dict[str, anyio.Event] = {}
        self.running = 0
        self.peak = 0

    def gate(self, key: str) -> anyio.Event:
        return self.gates.setdefault(key, anyio.Event())

    def started_event(self, key: str) -> anyio.Event:
        return self.started.setdefault(key, anyio.Event())

    async def body(self, arguments: Any, context: ptc.ToolContext) -> Any:
        key = arguments["key"]
        self.log.append(f"start {key}")
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.started_event(key).set()
        try:
            if arguments.get("wait"):
                await self.gate(key).wait()
            for other in arguments.get("await", []):
                await self.started_event(other).wait()
        finally:
            self.running -= 1
            self.log.append(f"end {key}")
        return key


def make_runtime(rec: Recorder, max_parallel_calls: int = 10) -> ptc.ToolRuntime:
    runtime = ptc.ToolRuntime(max_parallel_calls=max_parallel_calls)
    runtime.register(echo_tool("safe", execute=rec.body, concurrency_safe=True))
    runtime.register(echo_tool("excl", execute=rec.body))
    return runtime


def call(name: str, key: str, **extra: Any) -> ptc.ToolCall:
    return ptc.ToolCall(name, {"key": key, **extra}, call_id=key)


async def test_parallel_safe_bodies_overlap() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    with anyio.fail_after(10):  # deadlock guard: each body waits for the other to start
        results = await runtime.root.call_many(
            [call("safe", "a", **{"await": ["b"]}), call("safe", "b", **{"await": ["a"]})]
        )
    assert [r.value for r in results] == ["a", "b"]
    assert rec.peak == 2


async def test_exclusive_barriers_last_through_post_execute() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)

    async def post(payload: ptc.PostExecute, nxt: Any) -> Any:
        rec.log.append(f"post {payload.execution.call_id}")
        await anyio.lowlevel.checkpoint()
        return await nxt()

    runtime.on("tools/post-execute", post)
    await runtime.root.call_many(
        [call("safe", "a"), call("safe", "b"), call("excl", "x"), call("safe", "c")]
    )
    log = rec.log
    x_start = log.index("start x")
    assert {"end a", "end b", "post a", "post b"} <= set(log[:x_start])
    assert log[x_start : x_start + 3] == ["start x", "end x", "post x"]
    assert log.index("start c") > log.index("post x")


async def test_the_cap_holds() -> None:
    rec = Recorder()
    runtime = make_runtime(rec, max_parallel_calls=2)
    calls = [call("safe", str(i), wait=True) for i in range(5)]
    results: list[ptc.ToolResult] = []

    async def run() -> None:
        results.extend(await runtime.root.call_many(calls))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            for i in range(5):
                await rec.started_event(str(i)).wait()
                await anyio.wait_all_tasks_blocked()
                assert rec.running <= 2
                rec.gate(str(i)).set()
    assert rec.peak == 2
    assert [r.value for r in results] == [str(i) for i in range(5)]


async def test_results_are_in_submission_order() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    calls = [call("safe", str(i), wait=True) for i in range(4)]
    results: list[ptc.ToolResult] = []

    async def run() -> None:
        results.extend(await runtime.root.call_many(calls))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            for i in reversed(range(4)):  # finish in reverse order
                await rec.started_event(str(i)).wait()
                rec.gate(str(i)).set()
                await anyio.wait_all_tasks_blocked()
    assert [e for e in rec.log if e.startswith("end")] == ["end 3", "end 2", "end 1", "end 0"]
    assert [r.call_id for r in results] == ["0", "1", "2", "3"]


async def test_pre_execute_never_overlaps() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    log: list[str] = []

    async def pre(ex: ptc.ToolExecution, nxt: Any) -> Any:
        log.append(f"enter {ex.call_id}")
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        log.append(f"exit {ex.call_id}")
        return await nxt()

    runtime.on("tools/pre-execute", pre)
    await runtime.root.call_many([call("safe", str(i)) for i in range(4)])
    assert log == [f"{step} {i}" for i in range(4) for step in ("enter", "exit")]


async def test_mid_run_unregister_gives_unknown_tool() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    dispose = runtime.register(echo_tool("doomed"))

    async def unregister(arguments: Any, context: Any) -> Any:
        dispose()
        return "done"

    runtime.register(echo_tool("remover", execute=unregister))
    results = await runtime.root.call_many(
        [ptc.ToolCall("remover", {}), ptc.ToolCall("doomed", {})]
    )
    assert results[0].value == "done" and code(results[1]) == "UNKNOWN_TOOL"


async def test_abort_drains_started_calls_and_abandons_unstarted_ones_without_logging() -> None:
    rec = Recorder()
    runtime = make_runtime(rec, max_parallel_calls=2)
    logged: list[str] = []
    runtime.on("tools/result", lambda r: logged.append(r.call_id))
    signal = ptc.CancelSignal()
    results: list[ptc.ToolResult] = []

    async def run() -> None:
        calls = [call("safe", str(i), wait=True) for i in range(4)] + [call("excl", "x")]
        results.extend(await runtime.root.call_many(calls, signal=signal))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await rec.started_event("0").wait()
            await rec.started_event("1").wait()
            signal.cancel()
    assert [code(r) for r in results] == ["ABORTED", "ABORTED"] + ["ABORTED_BEFORE_DISPATCH"] * 3
    assert sorted(logged) == ["0", "1"]
    assert rec.log.count("end 0") == rec.log.count("end 1") == 1  # drained
    assert "start 2" not in rec.log


def root_site(runtime: ptc.ToolRuntime) -> Any:
    return lambda _: call_site(runtime.root)


def parallel_of(scope: ptc.Scope, name: str, arguments: Any) -> bool:
    return Call.create(call_site(scope), name, arguments).parallel


@pytest.mark.parametrize(
    ("safe", "arguments", "parallel"),
    [
        (True, {}, True),
        (None, {}, False),
        (False, {}, False),
        (lambda a: True, {}, True),
        (lambda a: 1, {}, False),
        (lambda a: "yes", {}, False),
        (lambda a: 1 / 0, {}, False),
        (True, {"n": "not an int"}, False),
    ],
)
async def test_execution_mode_is_exclusive_whenever_in_doubt(
    safe: Any, arguments: Any, parallel: bool
) -> None:
    runtime = ptc.ToolRuntime()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    runtime.register(echo_tool("t", concurrency_safe=safe, input_schema=schema))
    assert parallel_of(runtime.root, "t", arguments) is parallel


async def test_classifier_is_asked_after_argument_validation() -> None:
    asked: list[Any] = []
    runtime = ptc.ToolRuntime()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    runtime.register(
        echo_tool("t", concurrency_safe=lambda a: noted(asked, a, True), input_schema=schema)
    )
    parallel_of(runtime.root, "t", {"n": "bad"})
    parallel_of(runtime.root, "t", {"n": 1})
    assert asked == [{"n": 1}]


async def test_run_code_and_unknown_tools_are_always_exclusive() -> None:
    runtime = ptc.ToolRuntime()
    scope = runtime.scope("coder")
    scope.present_as("both")
    assert not parallel_of(scope, "run_code", {"code": "[]"})
    assert not parallel_of(scope, "missing", {})


async def test_one_scheduler_keeps_pre_execute_serial_across_concurrent_runs() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    log: list[str] = []

    async def pre(ex: ptc.ToolExecution, nxt: Any) -> Any:
        log.append(f"enter {ex.call_id}")
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        log.append(f"exit {ex.call_id}")
        return await nxt()

    runtime.on("tools/pre-execute", pre)
    scheduler = Scheduler(4)
    async with anyio.create_task_group() as group:
        for batch in ("a", "b", "c"):
            calls = [call("safe", f"{batch}{i}") for i in range(3)] + [call("excl", f"{batch}x")]
            group.start_soon(scheduler.run, root_site(runtime), calls)
    assert len(log) == 24
    for index in range(0, 24, 2):  # strictly alternating enter/exit of the same call
        assert log[index].replace("enter", "exit") == log[index + 1]


async def test_one_scheduler_exclusive_waits_for_other_batches_parallel_bodies() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    scheduler = Scheduler(4)

    async def post(payload: ptc.PostExecute, nxt: Any) -> Any:
        rec.log.append(f"post {payload.execution.call_id}")
        await anyio.lowlevel.checkpoint()
        return await nxt()

    runtime.on("tools/post-execute", post)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            first = [call("safe", "p1", wait=True)]
            group.start_soon(scheduler.run, root_site(runtime), first)
            await rec.started_event("p1").wait()
            group.start_soon(scheduler.run, root_site(runtime), [call("excl", "x")])
            await anyio.wait_all_tasks_blocked()
            assert "start x" not in rec.log  # the barrier waits for the in-flight body
            group.start_soon(scheduler.run, root_site(runtime), [call("safe", "p2")])
            await anyio.wait_all_tasks_blocked()
            rec.gate("p1").set()
    log = rec.log
    assert log.index("start x") > log.index("end p1")
    assert log.index("start p2") > log.index("post x")  # held through post-execute


async def test_one_scheduler_caps_parallel_bodies_across_runs() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    scheduler = Scheduler(3)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for batch in ("a", "b"):
                calls = [call("safe", f"{batch}{i}", wait=True) for i in range(3)]
                group.start_soon(scheduler.run, root_site(runtime), calls)
            await anyio.wait_all_tasks_blocked()
            assert rec.running == 3
            for batch in ("a", "b"):
                for i in range(3):
                    rec.gate(f"{batch}{i}").set()
    assert rec.peak == 3


async def test_call_many_uses_given_call_ids_and_nested_identity() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    token = ptc.ExecutionToken()
    seen: list[ptc.ToolExecution] = []
    runtime.on("tools/pre-execute", recorder(seen))
    await Scheduler(2).run(
        root_site(runtime), [call("safe", "k1")], parent=token, root_call_id="outer"
    )
    assert (seen[0].call_id, seen[0].root_call_id, seen[0].parent) == ("k1", "outer", token)


async def test_fast_lock_is_fifo_and_survives_cancelled_waiters() -> None:
    """The prepare lock: free costs nothing, held queues waiters in order, a waiter cancelled
    while queued leaves the queue, one cancelled as it is handed the lock passes it on."""
    from ptc._calls._scheduler import FastLock

    lock = FastLock()
    order: list[str] = []

    async def take(name: str, hold: anyio.Event | None = None) -> None:
        async with lock:
            order.append(name)
            if hold is not None:
                await hold.wait()

    async def take_within(scope: anyio.CancelScope, name: str) -> None:
        with scope:
            await take(name)

    release_first = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(take, "a", release_first)
            await anyio.wait_all_tasks_blocked()
            assert lock.locked()
            tg.start_soon(take, "b")
            cancelled = anyio.CancelScope()
            tg.start_soon(take_within, cancelled, "never")
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(take, "c")
            await anyio.wait_all_tasks_blocked()
            cancelled.cancel()  # leaves the queue while "a" holds the lock
            await anyio.wait_all_tasks_blocked()
            release_first.set()
    assert order == ["a", "b", "c"]
    assert not lock.locked()

    # Cancelled in the same turn as it is handed the lock: it passes the lock on.
    hold = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(take, "d", hold)
            await anyio.wait_all_tasks_blocked()
            handed = anyio.CancelScope()
            tg.start_soon(take_within, handed, "lost")
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(take, "e")
            await anyio.wait_all_tasks_blocked()
            hold.set()  # "d" releases: the lock goes to "lost"...
            await anyio.lowlevel.checkpoint()
            handed.cancel()  # ...which is cancelled before it runs
    assert not lock.locked()
    assert order[3] == "d" and order[-1] == "e"
