"""Code mode end to end with REAL contained workers (``worker.SubprocessBackend``, full
containment): policy on calls made from code, approvals, curated values, both language
profiles, and every failure kind produced on purpose.

One runtime (one zygote and pool) serves the module; each test uses its own child scope,
so listeners, guards, profile and limits stay local to it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest

import ptc
from tests._backends import ANYIO_BACKENDS, run_on_a_loop_anyio_did_not_start
from tests._typing import data
from worker import DIMENSIONS, FAILURE_KINDS

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root]

DEADLOCK_GUARD_SECONDS = 20

# The approver answers by the `text` argument of the call it is asked about.
APPROVALS: dict[str, ptc.ApprovalAnswer] = {"yes please": "allowed-once", "no thanks": "rejected"}
ASKED: list[ptc.ApprovalRequest] = []


async def approver(request: ptc.ApprovalRequest) -> ptc.ApprovalAnswer:
    ASKED.append(request)
    return APPROVALS.get(str(request.execution.arguments.get("text")), "unavailable")


@pytest.fixture(scope="module", params=ANYIO_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both of anyio's backends: the worker's trio branches (frames read in the run's
    task, background chores done inline) run here for real."""
    backend: str = request.param
    return backend


@pytest.fixture(scope="module")
async def rt() -> AsyncIterator[ptc.ToolRuntime]:
    async with ptc.ToolRuntime(approver=approver) as runtime:

        @runtime.tool(concurrency_safe=True)
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        @runtime.tool
        def shout(text: str) -> str:
            """Upper-case a text."""
            return text.upper()

        @runtime.tool
        def delete_everything(confirm: bool) -> str:
            """A dangerous tool."""
            return "deleted"

        yield runtime


_counter = 0


def code_scope(
    runtime: ptc.ToolRuntime,
    *,
    profile: ptc.Profile | None = None,
    limits: ptc.Limits | None = None,
) -> ptc.Scope:
    global _counter
    _counter += 1
    scope = runtime.scope(f"s{_counter}")
    scope.present_as("code", profile=profile, limits=limits)
    return scope


def ok(result: ptc.ToolResult) -> Any:
    assert not result.is_error, result.error
    return data(result.value)["result"]


def failure(result: ptc.ToolResult) -> tuple[str, str, str]:
    """(kind, detail, captured output) of a CODE_RUN_FAILED result."""
    assert result.error is not None and result.error.code == "CODE_RUN_FAILED", result.error
    head, sep, output = result.error.message.partition("\nCaptured output:\n")
    assert sep, result.error.message
    assert head.startswith("code run failed (")
    kind, _, detail = head[len("code run failed (") :].partition("): ")
    assert kind in FAILURE_KINDS
    return kind, detail, output


async def test_a_successful_run_reports_full_enforcement_in_five_dimensions(
    rt: ptc.ToolRuntime,
) -> None:
    scope = code_scope(rt)
    result = await scope.run_code("print('hello')\nreturn tools.add(a=2, b=3)")
    assert ok(result) == 5
    assert result.content == [{"type": "text", "text": "hello\n5"}]
    enforcement = data(result.meta)["enforcement"]
    assert set(enforcement) == set(DIMENSIONS)
    for dimension, report in enforcement.items():
        assert report["level"] == "full", (dimension, report)
        assert report["mechanism"]
    stats = data(result.meta)["stats"]
    assert stats["calls"] == 1 and stats["wall_ms"] > 0
    assert [e["name"] for e in data(result.meta)["dispatch_log"]] == ["add"]


async def test_a_guard_that_denies_one_tool_is_enforced_for_calls_from_code(
    rt: ptc.ToolRuntime,
) -> None:
    scope = code_scope(rt)
    scope.guard(lambda ex: "never in this scope" if ex.name == "delete_everything" else None)
    code = (
        "out = [tools.shout(text='fine')]\n"
        "try:\n    tools.delete_everything(confirm=True)\n"
        "except ToolCallError as e:\n    out.append([e.tool, e.code, e.message])\n"
        "return out"
    )
    assert ok(await scope.run_code(code)) == [
        "FINE",
        ["delete_everything", "DENIED", "never in this scope"],
    ]


async def test_an_ask_is_answered_by_the_approver_allowed_and_rejected(
    rt: ptc.ToolRuntime,
) -> None:
    scope = code_scope(rt)

    async def ask_for_shout(ex: ptc.ToolExecution, nxt: Any) -> Any:
        return ptc.Ask("shouting needs approval") if ex.name == "shout" else await nxt()

    scope.on("tools/pre-execute", ask_for_shout)
    ASKED.clear()
    code = (
        "out = [tools.shout(text='yes please')]\n"
        "for text in ['no thanks', 'nobody home']:\n"
        "    try:\n        tools.shout(text=text)\n"
        "    except ToolCallError as e:\n        out.append(e.code)\n"
        "return out"
    )
    result = await scope.run_code(code, call_id="asked")
    assert ok(result) == ["YES PLEASE", "ASK_REJECTED", "ASK_UNAVAILABLE"]
    assert [r.reason for r in ASKED] == ["shouting needs approval"] * 3
    assert [r.execution.call_id for r in ASKED] == ["asked:ptc:1", "asked:ptc:2", "asked:ptc:3"]
    assert all(r.execution.parent is not None for r in ASKED)


async def test_post_execute_accept_value_changes_what_the_program_receives(
    rt: ptc.ToolRuntime,
) -> None:
    scope = code_scope(rt)

    async def curate(payload: ptc.PostExecute, nxt: Any) -> Any:
        if payload.execution.name == "add":
            return ptc.Accept(value=-data(payload.result.value))
        return await nxt()

    scope.on("tools/post-execute", curate)
    result = await scope.run_code("return [tools.add(a=1, b=2), tools.add.map([{'a': 5, 'b': 5}])]")
    assert ok(result) == [-3, [-10]]


PROFILE_PROGRAM = """\
totals = {}
pairs = [{'a': i, 'b': i} for i in range(4)]
for value in tools.add.map(pairs):
    key = 'even' if value % 4 == 0 else 'odd'
    totals[key] = totals.get(key, 0) + value
import json
print(json.dumps(totals, sort_keys=True))
loud = parallel(lambda: tools.shout(text='a'), lambda: tools.shout(text='b'))
try:
    tools.add(a='x', b=1)
except ToolCallError as e:
    loud.append(e.code)
return {'totals': totals, 'loud': loud}
"""


async def test_the_same_program_gives_the_same_answer_in_both_profiles(
    rt: ptc.ToolRuntime,
) -> None:
    results = []
    for profile in ("python", "restricted"):
        scope = code_scope(rt, profile=profile)
        results.append(await scope.run_code(PROFILE_PROGRAM))
    python, restricted = results
    assert ok(python) == {"totals": {"even": 4, "odd": 8}, "loud": ["A", "B", "INVALID_ARGS"]}
    assert ok(restricted) == ok(python)
    assert python.content == restricted.content
    assert data(python.value)["stdout"] == '{"even": 4, "odd": 8}\n'


@pytest.mark.parametrize("profile", ["python", "restricted"])
async def test_catalog_operations_cross_a_real_contained_child(
    rt: ptc.ToolRuntime, profile: ptc.Profile
) -> None:
    scope = code_scope(rt, profile=profile)
    program = (
        "hits = catalog.search('upper-case text', limit=2)\n"
        "stub = catalog.describe(hits[0]['ident'])\n"
        "return [hits[0]['name'], 'def shout(*, text: str)' in stub, "
        "tools.call('shout', text='hi')]"
    )
    result = await scope.run_code(program)
    assert ok(result) == ["shout", True, "HI"]
    assert [e["name"] for e in data(result.meta)["dispatch_log"]] == ["shout"]


async def test_the_restricted_profile_refuses_what_python_allows(rt: ptc.ToolRuntime) -> None:
    code = "return ().__class__.__base__.__name__"
    assert ok(await code_scope(rt).run_code(code)) == "object"
    kind, detail, _ = failure(await code_scope(rt, profile="restricted").run_code(code))
    assert kind == "policy" and "__base__" in detail
    kind, detail, _ = failure(
        await code_scope(rt, profile="restricted").run_code("import os\nreturn os.getcwd()")
    )
    # refused at run time by the import guard, as CPython's own (catchable) error
    assert kind == "exception" and "ModuleNotFoundError: No module named 'os'" in detail


@pytest.mark.parametrize(
    ("code", "limits", "kind", "detail", "output"),
    [
        ("x = (", None, "syntax", "line 1", ""),
        ("return tools.nope()", None, "preflight", "valid names: tools.add", ""),
        ("print('p')\nraise ValueError('boom')", None, "exception", "ValueError: boom", "p\n"),
        ("print('p')\nreturn {1, 2}", None, "invalid-result", "JSON value", "p\n"),
        ("return 'x' * 5000", ptc.Limits(result_bytes=1000), "invalid-result", "1000 bytes", ""),
        (
            "print('t', flush=True)\nwhile True:\n    pass",
            ptc.Limits(wall_seconds=1),
            "timeout",
            "wall clock",
            "t\n",
        ),
        ("while True:\n    pass", ptc.Limits(cpu_seconds=1), "cpu-limit", "CPU", ""),
        (
            "x = bytearray(256 * 1024 * 1024)\nfor i in range(0, len(x), 4096):\n    x[i] = 1",
            ptc.Limits(memory_mib=64),
            "memory-limit",
            "64 MiB",
            "",
        ),
        ("x = 'a' * (2 ** 40)", ptc.Limits(memory_mib=64), "memory-limit", "MemoryError", ""),
        (
            "while True:\n    print('x' * 100)",
            ptc.Limits(stream_bytes=100_000, output_bytes=1000),
            "output-limit",
            "stream_bytes",
            None,
        ),
        (
            "for i in range(10):\n    print(tools.add(a=i, b=0))",
            ptc.Limits(max_calls=3),
            "call-limit",
            "3 tool calls",
            "0\n1\n2\n",
        ),
        (
            "import os\nprint('bye', flush=True)\nos._exit(3)",
            None,
            "worker-exit",
            "status 3",
            "bye\n",
        ),
        (
            # The channel is the child's only fd beyond stdio: garbage there is a protocol kill.
            "import os\nfor fd in range(3, 64):\n    try:\n"
            "        os.write(fd, b'\\xff\\xff\\xff\\xffgarbage')\n"
            "    except OSError:\n        pass\nreturn 1",
            None,
            "protocol",
            "frame",
            "",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and "\n" not in v and len(v) < 20 else None,
)
async def test_every_failure_kind_produced_on_purpose(
    rt: ptc.ToolRuntime,
    code: str,
    limits: ptc.Limits | None,
    kind: str,
    detail: str,
    output: str | None,
) -> None:
    result = await code_scope(rt, limits=limits).run_code(code)
    got_kind, got_detail, got_output = failure(result)
    assert got_kind == kind, result.error
    assert detail in got_detail
    if output is not None:
        assert got_output == output
    else:
        assert got_output  # truncated head and tail are kept
        assert len(got_output.encode()) < 2000
    if kind not in ("syntax", "preflight"):
        assert data(result.meta)["failure"]["kind"] == kind
        assert set(data(result.meta)["enforcement"]) == set(DIMENSIONS)


async def test_the_host_stays_healthy_after_failures(rt: ptc.ToolRuntime) -> None:
    # Runs after the failure kinds in this module: the shared backend still serves runs.
    scope = code_scope(rt)
    results = []
    async with anyio.create_task_group() as group:
        for i in range(4):

            async def one(i: int = i) -> None:
                results.append(ok(await scope.run_code(f"return tools.add(a={i}, b=1)")))

            group.start_soon(one)
    assert sorted(results) == [1, 2, 3, 4]


async def test_an_outer_abort_kills_the_worker_and_ends_the_run_as_aborted(
    rt: ptc.ToolRuntime,
) -> None:
    scope = code_scope(rt)
    started = anyio.Event()

    @scope.tool
    async def ping() -> int:  # on the event loop: Event.set() is not thread-safe
        """Tells the test the program is running."""
        started.set()
        return 1

    signal = ptc.CancelSignal()
    outcome: list[ptc.ToolResult] = []

    async def run() -> None:
        outcome.append(
            await scope.run_code(
                "tools.ping()\nprint('looping', flush=True)\nwhile True:\n    pass",
                signal=signal,
            )
        )

    with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await started.wait()
            signal.cancel("stop")
    (result,) = outcome
    assert result.error is not None and result.error.code == "ABORTED"
    assert result.error.message.startswith("tool call aborted\nCaptured output:\n")


async def test_closing_the_runtime_mid_run_is_abort() -> None:
    # Not entered with `async with`: aclose() is then callable from the test's task group.
    runtime = ptc.ToolRuntime(default_mode="code")
    started = anyio.Event()

    # Async: a plain tool runs on a worker thread, where trio refuses Event.set() ("must
    # be called from async context"); the program then failed and the test waited forever.
    @runtime.tool
    async def ping() -> int:
        """Tells the test the program is running."""
        started.set()
        return 1

    outcome: list[ptc.ToolResult] = []

    async def run() -> None:
        outcome.append(await runtime.root.run_code("tools.ping()\nwhile True:\n    pass"))

    try:
        with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await started.wait()
                await runtime.close()
    finally:
        await runtime.close()
    (result,) = outcome
    kind, detail, _ = failure(result)
    assert kind == "abort" and "closed" in detail


async def test_a_required_dimension_below_full_fails_closed_as_sandbox_unavailable() -> None:
    # Namespaces off is not enough here: Landlock + seccomp + cgroup.kill keep network and
    # processes at `full`. Landlock off leaves the filesystem with no protection at all.
    async with ptc.ToolRuntime(
        default_mode="code", containment=ptc.Containment(landlock=False, pool_size=0)
    ) as runtime:

        @runtime.tool
        def ping() -> int:
            """Never reached."""
            raise AssertionError("a run without full containment must not call tools")

        result = await runtime.root.run_code("return tools.ping()")
    kind, detail, _ = failure(result)
    assert kind == "sandbox-unavailable"
    assert "filesystem is none" in detail and "Containment(require=...)" in detail
    assert data(result.meta)["dispatch_log"] == []
    below = [d for d, e in data(result.meta)["enforcement"].items() if e["level"] != "full"]
    assert below and all(d in detail for d in below)


def test_nested_calls_work_in_a_host_that_runs_asyncio_run() -> None:
    # sniffio is installed (the dev extra): anyio then finds the running loop through it,
    # which outside a task works only on a loop anyio.run started. A host calling
    # asyncio.run() must get the same nested calls as one under anyio.run.
    async def main() -> ptc.ToolResult:
        async with ptc.ToolRuntime(default_mode="code") as runtime:

            @runtime.tool(concurrency_safe=True)
            async def add(a: int, b: int) -> int:
                """Add two numbers."""
                return a + b

            program = "return [tools.add(a=1, b=2), tools.add.map([{'a': 3, 'b': 4}] * 2)]"
            return await runtime.root.run_code(program)

    result = run_on_a_loop_anyio_did_not_start(main)
    assert not result.is_error, result.error
    assert data(result.value)["result"] == [3, [7, 7]]


async def test_live_output_arrives_in_order_from_a_contained_worker(rt: ptc.ToolRuntime) -> None:
    scope = code_scope(rt)
    chunks: list[Mapping[str, str]] = []
    scope.on("code/output", chunks.append)
    program = "for i in range(3):\n    print('line', i)\n    tools.add(a=i, b=0)\nreturn 'done'"
    result = await scope.run_code(program, call_id="live-1")
    assert ok(result) == "done"
    assert "".join(c["text"] for c in chunks) == "line 0\nline 1\nline 2\n"
    assert {(c["call_id"], c["stream"]) for c in chunks} == {("live-1", "stdout")}
