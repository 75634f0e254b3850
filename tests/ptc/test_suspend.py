"""Approvals that outlive a run: suspend on a deferred Ask, resume by replay.

Programs run on the in-process fake worker here (the semantics are the host's); the
real contained worker is exercised in ``tests/e2e/test_suspend_real.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc
from tests._backends import anyio_backend  # noqa: F401 - both anyio backends
from tests._typing import data
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio

NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Host:
    """Tools with side-effect counters, a policy that asks before writes, and an approver
    that defers every ask (a person will decide later)."""

    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()
        self.asked: list[str] = []
        self.pre_execute: Counter[str] = Counter()
        self.defer = True

    async def approver(self, request: ptc.ApprovalRequest) -> ptc.ApprovalAnswer:
        self.asked.append(request.execution.call_id)
        return "deferred" if self.defer else "allowed-once"

    def install(self, runtime: ptc.ToolRuntime) -> None:
        ran = self.ran

        @runtime.tool(concurrency_safe=True)
        def read(n: int) -> int:
            """Read a number."""
            ran["read"] += 1
            return n * 10

        @runtime.tool
        def write(n: int) -> str:
            """Write a number (asks first)."""
            ran["write"] += 1
            return f"wrote {n}"

        async def policy(execution: ptc.ToolExecution, nxt: Any) -> Any:
            self.pre_execute[execution.name] += 1
            if execution.name == "write":
                return ptc.Ask(f"write {data(execution.arguments)['n']}?")
            return await nxt()

        runtime.on("tools/pre-execute", policy)


def make_runtime(host: Host, **options: Any) -> ptc.ToolRuntime:
    options.setdefault("backend", FakeBackend())
    runtime = ptc.ToolRuntime(
        default_mode="code",
        approver=host.approver,
        containment=ptc.Containment(require=frozenset()),
        **options,
    )
    host.install(runtime)
    return runtime


@pytest.fixture
async def host_rt() -> AsyncIterator[tuple[Host, ptc.ToolRuntime]]:
    host = Host()
    async with make_runtime(host) as runtime:
        yield host, runtime


PROGRAM = """\
a = tools.read(n=1)
b = tools.read(n=2)
print("before", a + b)
w = tools.write(n=a + b)
print("after", w)
return {"sum": a + b, "write": w, "last": tools.read(n=3)}
"""


def code_of(result: ptc.ToolResult) -> str | None:
    return result.error.code if result.error is not None else None


def token_of(result: ptc.ToolResult) -> str:
    assert code_of(result) == "SUSPENDED", result.content
    token = data(result.meta)["suspension"]["token"]
    assert isinstance(token, str)
    return token


async def test_a_deferred_approval_suspends_the_run_and_says_so(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    result = await rt.root.run_code(PROGRAM, call_id="outer")
    assert code_of(result) == "SUSPENDED" and result.is_error
    suspension = data(result.meta)["suspension"]
    assert suspension["pending"] == {
        "sub_call_id": "outer:ptc:3",
        "name": "write",
        "arguments": {"n": 30},
        "reason": "write 30?",
    }
    text = data(result.content)[0]["text"]
    assert "awaits a person's approval (write 30?)" in text and "before 30" in text
    assert "after" not in text  # the worker stopped at the pending call
    assert host.ran == Counter({"read": 2}) and host.asked == ["outer:ptc:3"]
    log = data(result.meta)["dispatch_log"]
    assert [(e["name"], e["replayed"]) for e in log] == [("read", False), ("read", False)]


async def test_deferring_a_direct_call_is_ask_unavailable() -> None:
    host = Host()
    async with make_runtime(host) as rt:
        native = rt.scope("native")
        native.present_as("native")
        result = await native.call("write", {"n": 1})
    assert code_of(result) == "ASK_UNAVAILABLE"
    assert "deferred a direct call" in (result.error.message if result.error else "")
    assert host.ran["write"] == 0


async def test_resume_answers_recorded_calls_from_the_record_and_runs_the_rest_live(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    token = token_of(await rt.root.run_code(PROGRAM, call_id="outer"))
    host.pre_execute.clear()
    result = await rt.root.resume(token, "allowed-once")
    assert not result.is_error, result.content
    assert result.call_id == "outer"
    assert data(result.value) == {
        "result": {"sum": 30, "write": "wrote 30", "last": 30},
        "stdout": "before 30\nafter wrote 30\n",  # each line once
    }
    # The two reads were not run again, nor was their policy; the write and read 3 were.
    assert host.ran == Counter({"read": 3, "write": 1})
    assert host.pre_execute == Counter({"write": 1, "run_code": 1, "read": 1})
    assert host.asked == ["outer:ptc:3"]  # the person's answer replaced the approver
    log = data(result.meta)["dispatch_log"]
    assert [(e["sub_call_id"], e["name"], e["replayed"]) for e in log] == [
        ("outer:ptc:1", "read", True),
        ("outer:ptc:2", "read", True),
        ("outer:ptc:3", "write", False),
        ("outer:ptc:4", "read", False),
    ]
    assert data(result.meta)["stats"]["calls"] == 4


async def test_a_rejection_after_resume_reaches_the_program_as_a_tool_error(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    program = (
        "try:\n    tools.write(n=1)\nexcept ToolCallError as e:\n    return e.code\nreturn 'ok'"
    )
    token = token_of(await rt.root.run_code(program))
    result = await rt.root.resume(token, "rejected")
    assert data(result.value)["result"] == "ASK_REJECTED" and host.ran["write"] == 0


async def test_an_approval_may_come_long_after_the_wall_clock_would_have_expired() -> None:
    host = Host()
    limits = ptc.Limits(wall_seconds=1)
    async with make_runtime(host, limits=limits) as rt:
        token = token_of(await rt.root.run_code(PROGRAM))
        await anyio.sleep(1.5)  # the person takes longer than the whole run may
        result = await rt.root.resume(token, "allowed-once")
    assert not result.is_error, result.content
    assert data(result.value)["result"]["write"] == "wrote 30"


async def test_a_second_suspension_in_the_resumed_run_and_its_resume(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    program = (
        "w1 = tools.write(n=1)\nr = tools.read(n=5)\nw2 = tools.write(n=2)\nreturn [w1, r, w2]"
    )
    first = token_of(await rt.root.run_code(program, call_id="o"))
    second_run = await rt.root.resume(first, "allowed-once")
    second = token_of(second_run)
    assert second != first
    assert data(second_run.meta)["suspension"]["pending"]["sub_call_id"] == "o:ptc:3"
    done = await rt.root.resume(second, "allowed-once")
    assert data(done.value)["result"] == ["wrote 1", 50, "wrote 2"]
    assert host.ran == Counter({"write": 2, "read": 1})  # nothing ran twice
    log = data(done.meta)["dispatch_log"]
    assert [e["replayed"] for e in log] == [True, True, False]


async def test_a_program_that_chooses_its_calls_by_chance_diverges(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    program = (
        "import random, time\n"
        "n = random.randrange(10**9) + int(time.time_ns() % 1000)\n"
        "tools.read(n=n)\n"
        "return tools.write(n=1)"
    )
    token = token_of(await rt.root.run_code(program))
    result = await rt.root.resume(token, "allowed-once")
    assert code_of(result) == "CODE_RUN_FAILED"
    failure = data(result.meta)["failure"]
    assert failure["kind"] == "replay-diverged"
    assert "call 1 of the resumed run is read(" in failure["detail"]
    assert "but the suspended run made read(" in failure["detail"]
    assert host.ran["write"] == 0


async def test_a_resumed_program_that_never_reaches_the_pending_call_diverges(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    # The fake worker runs programs in this process, so a module attribute outlives a run:
    # the first run writes, the resumed one takes the other branch.
    program = (
        "import textwrap\n"
        "tools.read(n=1)\n"
        "if not getattr(textwrap, 'seen_by_test', False):\n"
        "    textwrap.seen_by_test = True\n"
        "    tools.write(n=1)\n"
        "return 'done'"
    )
    token = token_of(await rt.root.run_code(program))
    try:
        result = await rt.root.resume(token, "allowed-once")
    finally:
        import textwrap

        vars(textwrap).pop("seen_by_test", None)
    failure = data(result.meta)["failure"]
    assert failure["kind"] == "replay-diverged"
    assert "ended without making call 2 (write)" in failure["detail"]
    assert host.ran["write"] == 0


async def test_a_parallel_batch_with_a_deferred_call_is_replayed_as_a_batch(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    program = (
        "out = parallel(lambda: tools.read(n=1), lambda: tools.write(n=2), "
        "lambda: tools.read(n=3))\n"
        "return out"
    )
    suspended = await rt.root.run_code(program, call_id="p")
    token = token_of(suspended)
    # The read before the deferred write completed and is recorded; the one after it in
    # the batch never started.
    assert host.ran == Counter({"read": 1})
    result = await rt.root.resume(token, "allowed-once")
    assert data(result.value)["result"] == [10, "wrote 2", 30]
    assert host.ran == Counter({"read": 2, "write": 1})
    log = data(result.meta)["dispatch_log"]
    assert [(e["sub_call_id"], e["replayed"]) for e in log] == [
        ("p:ptc:1", True),
        ("p:ptc:2", False),
        ("p:ptc:3", False),
    ]


async def test_max_calls_counts_the_replayed_calls() -> None:
    host = Host()
    async with make_runtime(host, limits=ptc.Limits(max_calls=3)) as rt:
        program = "tools.read(n=1)\ntools.read(n=2)\ntools.write(n=3)\ntools.read(n=4)\nreturn 1"
        token = token_of(await rt.root.run_code(program))
        result = await rt.root.resume(token, "allowed-once")
    assert data(result.meta)["failure"]["kind"] == "call-limit"


async def test_tokens_are_single_use_scope_bound_and_unknown_ones_are_refused(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    other = rt.scope("other")
    token = token_of(await rt.root.run_code(PROGRAM))
    with pytest.raises(ptc.SuspensionError, match="belongs to scope 'root'"):
        await other.resume(token, "allowed-once")
    await rt.root.resume(token, "allowed-once")  # the wrong-scope attempt consumed nothing
    with pytest.raises(ptc.SuspensionError, match="resumed already"):
        await rt.root.resume(token, "allowed-once")
    with pytest.raises(ptc.SuspensionError, match="no suspended run has this token"):
        await rt.root.resume("nope", "allowed-once")
    with pytest.raises(ptc.UsageError, match="answer must be one of"):
        await rt.root.resume(token, "deferred")


class Clock:
    """A wall clock the test moves by hand (what a store's ``clock=`` reads)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("kind", ["memory", "files"])
async def test_an_expired_suspension_cannot_be_resumed(tmp_path: Path, kind: str) -> None:
    host, clock = Host(), Clock()
    store = (
        ptc.SuspensionStore(ttl_seconds=60, clock=clock)
        if kind == "memory"
        else ptc.FileSuspensionStore(tmp_path, ttl_seconds=60, clock=clock)
    )
    async with make_runtime(host, suspensions=store) as rt:
        suspended = await rt.root.run_code(PROGRAM, call_id="late")
        token = token_of(suspended)
        assert data(suspended.meta)["suspension"]["expires_at"] == clock.now + 60
        clock.now += 59.9  # still live: found by its call id
        assert rt.root.suspension("late") is not None
        clock.now += 0.1  # the expiry itself
        assert rt.root.suspension("late") is None
        with pytest.raises(ptc.SuspensionError, match="expired"):
            await rt.root.resume(token, "allowed-once")
        with pytest.raises(ptc.SuspensionError, match="no suspended run has this token"):
            await rt.root.resume(token, "allowed-once")  # the expired record is gone
    assert host.ran["write"] == 0


async def test_twenty_suspended_runs_resumed_at_once(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    tokens: dict[int, str] = {}

    async def suspend(i: int) -> None:
        program = f"a = tools.read(n={i})\nreturn tools.write(n=a)"
        tokens[i] = token_of(await rt.root.run_code(program, call_id=f"r{i}"))

    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(suspend, i)
    results: dict[int, ptc.ToolResult] = {}

    async def resume(i: int) -> None:
        results[i] = await rt.root.resume(tokens[i], "allowed-once")

    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(resume, i)
    assert {i: data(r.value)["result"] for i, r in results.items()} == {
        i: f"wrote {i * 10}" for i in range(20)
    }
    assert host.ran == Counter({"read": 20, "write": 20})


def files_of(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.suffix == ".json")


async def test_the_file_store_survives_a_restart(tmp_path: Path) -> None:
    host = Host()
    async with make_runtime(host, suspensions=ptc.FileSuspensionStore(tmp_path)) as first:
        agent = first.scope("agent")
        agent.present_as("code")
        token = token_of(await agent.run_code(PROGRAM))
    assert len(files_of(tmp_path)) == 1 and token not in files_of(tmp_path)[0].name
    # A new host process would build the same runtime and scopes again.
    again = Host()
    async with make_runtime(again, suspensions=ptc.FileSuspensionStore(tmp_path)) as second:
        agent = second.scope("agent")
        agent.present_as("code")
        result = await agent.resume(token, "allowed-once")
    assert data(result.value)["result"]["write"] == "wrote 30"
    assert again.ran == Counter({"write": 1, "read": 1})  # the reads came from the record
    assert files_of(tmp_path) == []


def tamper(file: Path, change: str) -> None:
    envelope = json.loads(file.read_text())
    if change == "code":
        envelope["record"]["code"] = "return tools.write(n=666)"
    elif change == "pending":
        envelope["record"]["pending"]["arguments"] = {"n": 666}
    elif change == "garbage":
        file.write_bytes(b"\x00\xffnot json at all")
        return
    elif change == "truncated":
        file.write_bytes(file.read_bytes()[:40])
        return
    file.write_text(json.dumps(envelope))


@pytest.mark.parametrize("change", ["code", "pending", "garbage", "truncated"])
async def test_a_corrupt_or_tampered_file_is_refused_and_never_run(
    tmp_path: Path, change: str
) -> None:
    host = Host()
    store = ptc.FileSuspensionStore(tmp_path)
    async with make_runtime(host, suspensions=store) as rt:
        token = token_of(await rt.root.run_code(PROGRAM))
        (file,) = files_of(tmp_path)
        tamper(file, change)
        with pytest.raises(ptc.SuspensionError, match="refused|corrupt"):
            await rt.root.resume(token, "allowed-once")
    assert host.ran["write"] == 0


async def test_a_store_with_another_secret_refuses_the_files(tmp_path: Path) -> None:
    host = Host()
    async with make_runtime(
        host, suspensions=ptc.FileSuspensionStore(tmp_path, secret=b"k" * 32)
    ) as rt:
        token = token_of(await rt.root.run_code(PROGRAM))
    async with make_runtime(
        Host(), suspensions=ptc.FileSuspensionStore(tmp_path, secret=b"x" * 32)
    ) as rt:
        with pytest.raises(ptc.SuspensionError, match="signature"):
            await rt.root.resume(token, "allowed-once")


def test_store_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ptc.UsageError):
        ptc.SuspensionStore(ttl_seconds=0)
    with pytest.raises(ptc.UsageError, match="clock"):
        ptc.SuspensionStore(clock=1.0)  # type: ignore[arg-type]
    with pytest.raises(ptc.UsageError):
        ptc.FileSuspensionStore(tmp_path, secret=b"short")
    with pytest.raises(ptc.UsageError):
        ptc.ToolRuntime(suspensions=object())  # type: ignore[arg-type]


# -- approvals addressable by call id (what an agent framework knows) ------------------------


async def test_the_paused_run_is_found_by_its_call_id_in_its_scope_only(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    _, rt = host_rt
    token = token_of(await rt.root.run_code(PROGRAM, call_id="tc_1"))
    found = rt.root.suspension("tc_1")
    assert found is not None and found.token == token and found.call_id == "tc_1"
    assert found.pending.name == "write" and found.code == PROGRAM
    assert rt.root.suspension("tc_2") is None and rt.root.suspension("") is None
    assert rt.scope("other").suspension("tc_1") is None


async def test_calling_run_code_again_with_a_paused_call_id_runs_nothing(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    first = await rt.root.run_code(PROGRAM, call_id="tc_1")
    ran, asked = Counter(host.ran), list(host.asked)
    again = await rt.root.run_code(PROGRAM, call_id="tc_1")
    assert code_of(again) == "SUSPENDED"
    assert again.content == first.content and again.meta == first.meta
    assert host.ran == ran and host.asked == asked  # no worker, no tool, no approver
    # Another program under that call id is not the paused one: it runs.
    other = await rt.root.run_code("return tools.read(n=5)", call_id="tc_1")
    assert data(other.value)["result"] == 50


@pytest.mark.parametrize("by", ["call_id", "token"])
async def test_resume_takes_the_call_id_or_the_token(
    host_rt: tuple[Host, ptc.ToolRuntime], by: str
) -> None:
    host, rt = host_rt
    token = token_of(await rt.root.run_code(PROGRAM, call_id="tc_1"))
    result = await rt.root.resume("tc_1" if by == "call_id" else token, "allowed-once")
    assert data(result.value)["result"]["write"] == "wrote 30"
    assert rt.root.suspension("tc_1") is None
    with pytest.raises(ptc.SuspensionError, match="resumed already"):
        await rt.root.resume(token, "allowed-once")
    assert host.ran == Counter({"read": 3, "write": 1})


async def test_a_discarded_suspension_never_runs_and_cannot_be_resumed(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    host, rt = host_rt
    token_of(await rt.root.run_code(PROGRAM, call_id="tc_1"))
    dropped = await rt.root.discard_suspension("tc_1")
    assert dropped.pending.name == "write" and rt.root.suspension("tc_1") is None
    with pytest.raises(ptc.SuspensionError):
        await rt.root.resume("tc_1", "allowed-once")
    with pytest.raises(ptc.SuspensionError):
        await rt.root.discard_suspension("tc_1")
    assert host.ran == Counter({"read": 2})
    # The call id is free again: calling run_code with it runs the program afresh.
    again = await rt.root.run_code(PROGRAM, call_id="tc_1")
    assert code_of(again) == "SUSPENDED" and host.ran == Counter({"read": 4})


async def test_a_file_store_finds_a_paused_run_by_call_id_after_a_restart(tmp_path: Path) -> None:
    host = Host()
    store_dir = tmp_path / "suspended"
    async with make_runtime(host, suspensions=ptc.FileSuspensionStore(store_dir)) as rt:
        first = await rt.root.run_code(PROGRAM, call_id="tc_9")
    host = Host()
    async with make_runtime(host, suspensions=ptc.FileSuspensionStore(store_dir)) as rt:
        found = rt.root.suspension("tc_9")
        assert found is not None and found.token == token_of(first)
        again = await rt.root.run_code(PROGRAM, call_id="tc_9")
        assert again.content == first.content and not host.ran
        result = await rt.root.resume("tc_9", "rejected")
        assert rt.root.suspension("tc_9") is None
    assert code_of(result) == "CODE_RUN_FAILED" and "ASK_REJECTED" in str(result.error)
    assert not any(p.suffix == ".call" for p in store_dir.iterdir())


async def test_a_suspension_counts_the_resumes_before_it(
    host_rt: tuple[Host, ptc.ToolRuntime],
) -> None:
    _, rt = host_rt
    program = "tools.write(n=1)\ntools.write(n=2)\nreturn tools.write(n=3)"
    await rt.root.run_code(program, call_id="tc_1")
    counts = []
    for _ in range(3):
        found = rt.root.suspension("tc_1")
        assert found is not None
        counts.append(found.resumes)
        result = await rt.root.resume("tc_1", "allowed-once")
    assert counts == [0, 1, 2] and data(result.value)["result"] == "wrote 3"
