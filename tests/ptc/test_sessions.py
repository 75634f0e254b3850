"""Sessions, the host's side: the view of a scope, the commit rules, expiry, eviction, runs
in call order, fork, reset, close, reopening, paused runs.

Programs run on the in-process fake here (it keeps state by reference; the host's rules
are the same); real contained workers, files and the serializer are exercised in
``tests/e2e/test_sessions_real.py`` and ``tests/worker/test_session.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import ptc
from tests._backends import anyio_backend  # noqa: F401 - both anyio backends
from tests._typing import data
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio


class Clock:
    """A clock the test moves (expiry without sleeping)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make_runtime(**options: Any) -> ptc.ToolRuntime:
    options.setdefault("backend", FakeBackend())
    runtime = ptc.ToolRuntime(
        default_mode="code", containment=ptc.Containment(require=frozenset()), **options
    )

    @runtime.tool
    def fetch(day: str) -> list[dict[str, int]]:
        """The rows of a day."""
        return [{"v": v} for v in (1, 4, 5)]

    return runtime


@pytest.fixture
async def runtime() -> AsyncIterator[ptc.ToolRuntime]:
    async with make_runtime() as rt:
        yield rt


def meta(result: ptc.ToolResult) -> dict[str, Any]:
    found = data(result.meta)["session"]
    assert isinstance(found, dict)
    return found


def out(result: ptc.ToolResult) -> Any:
    """What the program returned."""
    assert not result.is_error, result.text
    return data(result.value)["result"]


def code_of(result: ptc.ToolResult) -> str | None:
    return result.error.code if result.error is not None else None


async def test_the_issue_example_fetch_then_filter(runtime: ptc.ToolRuntime) -> None:
    session = runtime.root.session()
    first = await session.run_code("rows = tools.fetch(day='mon')\nimport math as m")
    second = await session.run_code("return [m.floor(x['v']) for x in rows if x['v'] > 3]")
    assert second.value == {"result": [4, 5], "stdout": ""}
    assert set(meta(second)) == {
        "id", "version", "bytes", "names", "dropped", "kept_previous", "expires_at"
    }  # fmt: skip
    assert meta(first)["version"] == 1 and meta(second)["version"] == 2
    assert meta(second)["names"] == ["rows", "m"] and meta(second)["id"] == session.id
    assert not meta(second)["kept_previous"]


async def test_the_scope_itself_stays_sessionless(runtime: ptc.ToolRuntime) -> None:
    session = runtime.root.session()
    await session.run_code("x = 1")
    result = await runtime.root.run_code("return 'x' in globals()")
    assert out(result) is False and "session" not in data(result.meta)


async def test_the_model_sees_what_persists_and_reset(runtime: ptc.ToolRuntime) -> None:
    session = runtime.root.session()
    (spec,) = session.model_tools(format="openai")
    (plain,) = runtime.root.model_tools(format="openai")
    function = data(spec)["function"]
    assert "persist" in function["description"] and "reset=true" in function["description"]
    assert function["parameters"]["properties"]["reset"] == {
        "type": "boolean",
        "description": "Start from an empty session: no variables, no files.",
    }
    assert "reset" not in json.dumps(data(plain))
    assert function["description"].startswith(data(plain)["function"]["description"])
    assert data(session.view().visible["run_code"].input_schema)["properties"]["reset"]
    assert session.sdk() == runtime.root.sdk()


async def test_reset_starts_from_an_empty_session(runtime: ptc.ToolRuntime) -> None:
    session = runtime.root.session()
    await session.run_code("x = 1")
    result = await session.call("run_code", {"code": "return 'x' in globals()", "reset": True})
    assert out(result) is False and meta(result)["version"] == 2
    bad = await session.call("run_code", {"code": "1", "reset": "yes"})
    assert code_of(bad) == "INVALID_ARGS"


async def test_an_exception_commits_what_was_assigned_before_it(
    runtime: ptc.ToolRuntime,
) -> None:
    session = runtime.root.session()
    failed = await session.run_code("a = 1\nraise ValueError('boom')\nb = 2")
    assert code_of(failed) == "CODE_RUN_FAILED"
    assert meta(failed)["version"] == 1 and not meta(failed)["kept_previous"]
    assert out(await session.run_code("return [a, 'b' in globals()]")) == [1, False]


async def test_a_killed_run_keeps_the_previous_version_and_says_so() -> None:
    async with make_runtime() as rt:
        scope = rt.scope("short")
        scope.present_as("code", limits=ptc.Limits(wall_seconds=0.5))
        session = scope.session()
        await session.run_code("x = 1")
        killed = await session.run_code("x = 2\nimport time\ntime.sleep(5)")
        assert code_of(killed) == "CODE_RUN_FAILED" and "(timeout)" in killed.text
        assert meta(killed)["kept_previous"] is True and meta(killed)["version"] == 1
        assert "not saved (the run was stopped (timeout)" in killed.text
        assert out(await session.run_code("return x")) == 1


async def test_an_aborted_run_keeps_the_previous_version(runtime: ptc.ToolRuntime) -> None:
    session = runtime.root.session()
    await session.run_code("x = 1")
    signal = ptc.CancelSignal()

    async def cancel_soon() -> None:
        await anyio.sleep(0.2)
        signal.cancel("the user stopped it")

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_soon)
        aborted = await session.run_code("x = 2\nimport time\ntime.sleep(2)", signal=signal)
    assert code_of(aborted) == "ABORTED"
    assert meta(aborted)["kept_previous"] is True and "the run was aborted" in aborted.text
    assert out(await session.run_code("return x")) == 1


async def test_dropped_names_are_told_to_the_model_never_silently(
    runtime: ptc.ToolRuntime,
) -> None:
    session = runtime.root.session()
    result = await session.run_code("g = (i for i in range(3))\nkeep = 1\nprint('hi')")
    (dropped,) = meta(result)["dropped"]
    assert dropped["name"] == "g" and "generator" in dropped["reason"]
    assert result.text.startswith("hi\n[session] Not kept for the next run: g (a generator")


async def test_runs_on_one_session_run_one_at_a_time_in_call_order(
    runtime: ptc.ToolRuntime,
) -> None:
    session = runtime.root.session()
    await session.run_code("order = []")
    results: dict[int, ptc.ToolResult] = {}

    async def step(n: int) -> None:
        results[n] = await session.run_code(f"order.append({n})\nreturn list(order)")

    async def slow_policy(execution: ptc.ToolExecution, nxt: Any) -> Any:
        if execution.name == "run_code" and "append(1)" in str(execution.arguments):
            await anyio.sleep(0.05)  # the first call's stages take longest
        return await nxt()

    runtime.on("tools/pre-execute", slow_policy)
    async with anyio.create_task_group() as group:
        for n in range(1, 6):
            group.start_soon(step, n)
            await anyio.lowlevel.checkpoint()  # called in this order
    assert [out(results[n]) for n in range(1, 6)] == [
        [1], [1, 2], [1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4, 5]
    ]  # fmt: skip


async def test_a_fork_is_independent_from_here_on(runtime: ptc.ToolRuntime) -> None:
    session = runtime.root.session()
    await session.run_code("items = [1]")
    branch = await session.fork()
    assert branch.id != session.id
    await branch.run_code("items.append(2)")
    await session.run_code("items.append(3)")
    assert out(await session.run_code("return items")) == [1, 3]
    assert out(await branch.run_code("return items")) == [1, 2]


async def test_a_session_expires_after_its_ttl_without_a_run() -> None:
    clock = Clock()
    async with make_runtime(sessions=ptc.MemorySessionStore(clock=clock)) as rt:
        session = rt.root.session(ttl_seconds=60)
        first = await session.run_code("x = 1")
        assert meta(first)["expires_at"] == clock.now + 60
        clock.now += 59  # sliding: each run starts the idle clock again
        await session.run_code("x += 1")
        clock.now += 59
        assert out(await session.run_code("return x")) == 2
        clock.now += 61
        expired = await session.run_code("return x")
        assert code_of(expired) == "SESSION_EXPIRED"
        assert "expired after 60 s without a run" in expired.text
        with pytest.raises(ptc.SessionError, match="expired"):
            rt.root.session(id=session.id)


@pytest.mark.parametrize("ttl", [0, -1, 86_401, float("nan"), "60"])
async def test_a_ttl_outside_a_day_is_refused(runtime: ptc.ToolRuntime, ttl: Any) -> None:
    with pytest.raises(ptc.UsageError, match="ttl_seconds"):
        runtime.root.session(ttl_seconds=ttl)


async def test_the_store_evicts_the_least_recently_used_and_says_so() -> None:
    store = ptc.MemorySessionStore(max_sessions=2)
    async with make_runtime(sessions=store) as rt:
        a, b = rt.root.session(), rt.root.session()
        await a.run_code("x = 'a'")
        await b.run_code("x = 'b'")
        await a.run_code("x")  # a is now the more recently used
        c = rt.root.session()
        assert len(store) == 2
        gone = await b.run_code("return x")
        assert code_of(gone) == "SESSION_EXPIRED" and "evicted" in gone.text
        assert "least recently used" in gone.text
        assert out(await a.run_code("return x")) == "a"
        assert out(await c.run_code("return 1")) == 1


async def test_a_closed_session_is_a_tool_error_not_an_exception(
    runtime: ptc.ToolRuntime,
) -> None:
    session = runtime.root.session()
    await session.run_code("x = 1")
    await session.close()
    result = await session.call("run_code", {"code": "return x"})
    assert code_of(result) == "SESSION_EXPIRED" and "closed" in result.text
    with pytest.raises(ptc.ClosedError):
        await session.fork()


async def test_a_session_reopens_by_id_in_its_own_scope_only(runtime: ptc.ToolRuntime) -> None:
    session = runtime.root.session()
    await session.run_code("x = 41")
    again = runtime.root.session(id=session.id)
    assert out(await again.run_code("return x + 1")) == 42
    other = runtime.scope("other")
    with pytest.raises(ptc.SessionError, match="unknown in this scope"):
        other.session(id=session.id)
    with pytest.raises(ptc.UsageError):
        runtime.root.session(id="no spaces allowed")


async def test_create_starts_a_session_under_a_given_id(runtime: ptc.ToolRuntime) -> None:
    one = runtime.root.session(id="thread-1", create=True)
    await one.run_code("x = 'kept'")
    same = runtime.root.session(id="thread-1", create=True)
    assert out(await same.run_code("return x")) == "kept"


async def test_the_restricted_profile_carries_data_only() -> None:
    async with make_runtime(profile="restricted") as rt:
        session = rt.root.session()
        first = await session.run_code("rows = [1, 2]\ndef double(x):\n    return 2 * x")
        assert [d["name"] for d in meta(first)["dropped"]] == ["double"]
        assert "data only" in meta(first)["dropped"][0]["reason"]
        assert out(await session.run_code("return rows")) == [1, 2]


async def test_a_state_of_another_profile_is_refused_until_reset(tmp_path: Path) -> None:
    async with make_runtime(sessions=ptc.FileSessionStore(tmp_path)) as rt:
        session = rt.root.session()
        await session.run_code("x = 1")
    async with make_runtime(sessions=ptc.FileSessionStore(tmp_path), profile="restricted") as rt:
        again = rt.root.session(id=session.id)
        refused = await again.run_code("return x")
        assert code_of(refused) == "SESSION_EXPIRED"
        assert "state of the python profile" in refused.text and "reset=true" in refused.text
        assert out(await again.run_code("return 1", reset=True)) == 1


async def test_call_many_and_call_are_the_scopes_with_the_session(
    runtime: ptc.ToolRuntime,
) -> None:
    native = runtime.scope("both")
    native.present_as("both")
    session = native.session()
    results = await session.call_many(
        [ptc.ToolCall("fetch", {"day": "x"}), ptc.ToolCall("run_code", {"code": "y = 2"})]
    )
    assert [r.is_error for r in results] == [False, False]
    assert out(await session.run_code("return y")) == 2


class Approvals:
    def __init__(self) -> None:
        self.defer = True

    async def __call__(self, request: ptc.ApprovalRequest) -> ptc.ApprovalAnswer:
        return "deferred" if self.defer else "allowed-once"


async def _deferring_runtime(approvals: Approvals) -> ptc.ToolRuntime:
    rt = make_runtime(approver=approvals)

    @rt.tool
    def write(n: int) -> int:
        """Write (asks first)."""
        return n

    async def ask(execution: ptc.ToolExecution, nxt: Any) -> Any:
        return ptc.Ask("write?") if execution.name == "write" else await nxt()

    rt.on("tools/pre-execute", ask)
    return rt


async def test_a_suspended_run_commits_nothing_and_its_resume_commits() -> None:
    approvals = Approvals()
    async with await _deferring_runtime(approvals) as rt:
        session = rt.root.session()
        await session.run_code("x = 1")
        paused = await session.run_code("x = 2\nw = tools.write(n=x)", call_id="p1")
        assert code_of(paused) == "SUSPENDED" and meta(paused)["kept_previous"] is True
        assert "[session] Nothing of this run is saved while it is paused" in paused.text
        branch = await session.fork()  # a fork does not move the session on
        assert out(await branch.run_code("return x")) == 1
        resumed = await session.resume("p1", "allowed-once")
        assert not resumed.is_error and meta(resumed)["version"] == 2
        assert out(await session.run_code("return [x, w]")) == [2, 2]


async def test_a_resumed_run_does_not_commit_when_the_session_moved_on() -> None:
    approvals = Approvals()
    async with await _deferring_runtime(approvals) as rt:
        session = rt.root.session()
        paused = await session.run_code("x = 2\nw = tools.write(n=x)", call_id="p1")
        assert code_of(paused) == "SUSPENDED"
        await session.run_code("x = 'moved on'")
        resumed = await rt.root.resume("p1", "allowed-once")
        assert not resumed.is_error
        assert meta(resumed)["kept_previous"] is True and meta(resumed)["version"] == 1
        assert "moved on to version 1 while this run was paused at version 0" in resumed.text
        assert out(await session.run_code("return x")) == "moved on"
