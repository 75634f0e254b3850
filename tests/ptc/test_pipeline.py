"""The eight pipeline steps: codes, messages, waterfalls, cancellation and frozen results."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings

import ptc
from ptc._calls._body import BodyFailure, BodyResult
from ptc._calls._pipeline import Call
from ptc._calls._tools import compact_json_render
from ptc._scopes._scope import call_site
from tests._typing import data
from worker.testing import FakeBackend

from .helpers import echo_tool, noted, recorder
from .test_json import json_values

pytestmark = pytest.mark.anyio

NUMBER_OUT = ptc.Output({"type": "integer"}, compact_json_render)
NUMBER_IN = {"type": "object", "properties": {"a": {"type": "integer"}}}


def code(result: ptc.ToolResult) -> str | None:
    return result.error.code if result.error else None


@pytest.fixture
def runtime() -> ptc.ToolRuntime:
    # Programs run in-process (no isolation): these tests are about the pipeline.
    runtime = ptc.ToolRuntime(
        backend=FakeBackend(), containment=ptc.Containment(require=frozenset())
    )
    runtime.register(echo_tool("echo"))
    return runtime


async def test_success_result_is_frozen_with_rendered_content(runtime: ptc.ToolRuntime) -> None:
    result = await runtime.root.call("echo", {"a": [1, 2]}, call_id="c1")
    assert (result.call_id, result.name, result.is_error) == ("c1", "echo", False)
    assert result.value == {"a": [1, 2]}
    assert result.content == [{"type": "text", "text": '{"a":[1,2]}'}]
    with pytest.raises(TypeError):
        data(result.value)["a"].append(3)
    with pytest.raises(AttributeError):
        result.is_error = True  # type: ignore[misc]


async def test_unknown_tool(runtime: ptc.ToolRuntime) -> None:
    result = await runtime.root.call("nope", {})
    assert code(result) == "UNKNOWN_TOOL"
    assert result.content == [{"type": "text", "text": "Error: unknown tool `nope`"}]


@pytest.mark.parametrize(
    "arguments",
    [{"x": math.nan}, {"x": math.inf}, {1: "int key"}, {"x": (1, 2)}, {"x": {1, 2}}, [1], "s"],
)
async def test_lossy_or_exotic_arguments_are_rejected_before_dispatch(
    runtime: ptc.ToolRuntime, arguments: Any
) -> None:
    seen: list[Any] = []
    runtime.on("tools/pre-execute", recorder(seen))
    result = await runtime.root.call("echo", arguments)
    assert code(result) == "INVALID_ARGS"
    assert seen == []


async def test_invalid_args_lists_every_error_with_its_json_path() -> None:
    runtime = ptc.ToolRuntime()
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "n": {"type": "integer", "maximum": 5},
            "deep": {"type": "object", "properties": {"k": {"enum": ["a"]}}},
        },
        "required": ["q"],
        "additionalProperties": False,
    }
    runtime.register(echo_tool("strict", input_schema=schema))
    result = await runtime.root.call("strict", {"n": 9, "deep": {"k": "b"}, "x": 1})
    assert code(result) == "INVALID_ARGS"
    message = result.error.message  # type: ignore[union-attr]
    for fragment in (
        "$.n: 9 is greater than",
        '$.deep.k: "b" is not one of ["a"]',
        '$: "q" is a required property',
        '$: unexpected property "x"',
    ):
        assert fragment in message


async def test_deep_arguments_work(runtime: ptc.ToolRuntime) -> None:
    deep: Any = {"leaf": 1}
    for _ in range(50):
        deep = {"next": [deep]}
    result = await runtime.root.call("echo", deep)
    assert result.value == deep


async def test_proto_works_as_a_tool_name() -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(echo_tool("__proto__"))
    result = await runtime.root.call("__proto__", {"constructor": 1})
    assert result.value == {"constructor": 1}


async def test_direct_native_call_under_code_collapses_to_unknown_tool(
    runtime: ptc.ToolRuntime,
) -> None:
    scope = runtime.scope("coder")
    scope.present_as("code")
    result = await scope.call("echo", {})
    assert code(result) == "UNKNOWN_TOOL"
    assert "from inside a `run_code` program" in result.error.message  # type: ignore[union-attr]
    both = runtime.scope("both")
    both.present_as("both")
    assert not (await both.call("echo", {})).is_error


async def test_pre_aborted_collapsed_call_is_aborted_before_dispatch(
    runtime: ptc.ToolRuntime,
) -> None:
    scope = runtime.scope("coder")
    scope.present_as("code")
    signal = ptc.CancelSignal()
    signal.cancel()
    assert code(await scope.call("echo", {}, signal=signal)) == "ABORTED_BEFORE_DISPATCH"


async def test_nested_calls_are_exempt_from_collapse_and_see_only_the_opaque_parent(
    runtime: ptc.ToolRuntime,
) -> None:
    executions: list[ptc.ToolExecution] = []

    async def observe(ex: ptc.ToolExecution, nxt: Any) -> Any:
        executions.append(ex)
        return await nxt()

    runtime.on("tools/pre-execute", observe)
    runtime.register(echo_tool("num", input_schema=NUMBER_IN))
    scope = runtime.scope("coder")
    scope.present_as("code")
    program = "return [tools.num(a=1), tools.num(a=2)]"
    result = await scope.run_code(program, call_id="outer")
    assert result.value == {"result": [{"a": 1}, {"a": 2}], "stdout": ""}
    assert data(result.meta)["stats"]["calls"] == 2
    outer, first, second = executions
    assert [first.call_id, second.call_id] == ["outer:ptc:1", "outer:ptc:2"]
    assert first.root_call_id == second.root_call_id == "outer"
    assert first.parent is outer.token and outer.parent is None
    assert repr(first.parent) == "<ptc.ExecutionToken>"
    assert isinstance(first.parent, ptc.ExecutionToken)


async def test_run_code_cannot_be_called_from_inside_a_program(runtime: ptc.ToolRuntime) -> None:
    scope = runtime.scope("coder")
    scope.present_as("code")
    nested = Call.create(call_site(scope), "run_code", {"code": "1"}, parent=ptc.ExecutionToken())
    result = await nested.run()
    assert code(result) == "UNKNOWN_TOOL"
    assert "cannot be called from inside a program" in result.error.message  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("decision", "expected"),
    [(ptc.Deny("nope"), "DENIED"), (ptc.Cancel(), "CANCELLED"), (ptc.Allow(), None)],
)
async def test_pre_execute_decisions(
    runtime: ptc.ToolRuntime, decision: Any, expected: Any
) -> None:
    async def decide(ex: Any, nxt: Any) -> Any:
        return decision

    runtime.on("tools/pre-execute", decide)
    result = await runtime.root.call("echo", {})
    assert code(result) == expected
    if expected == "DENIED":
        assert result.content == [{"type": "text", "text": "Error: nope"}]


@pytest.mark.parametrize(
    ("answer", "expected", "says"),
    [
        ("allowed-once", None, ""),
        ("rejected", "ASK_REJECTED", "rejected"),
        ("cancelled", "ASK_CANCELLED", "cancelled"),
        ("unavailable", "ASK_UNAVAILABLE", "approver said so"),
        ("maybe", "ASK_UNAVAILABLE", "answered 'maybe'"),
        (RuntimeError("down"), "ASK_UNAVAILABLE", "raised RuntimeError"),
    ],
)
async def test_the_ask_outcome_mapping(answer: Any, expected: Any, says: str) -> None:
    requests: list[ptc.ApprovalRequest] = []

    async def approver(request: ptc.ApprovalRequest) -> Any:
        requests.append(request)
        if isinstance(answer, Exception):
            raise answer
        return answer

    runtime = ptc.ToolRuntime(approver=approver)
    runtime.register(echo_tool("echo"))

    async def ask(ex: Any, nxt: Any) -> Any:
        return ptc.Ask("sure?", display_reason="Run echo?")

    runtime.on("tools/pre-execute", ask)
    result = await runtime.root.call("echo", {})
    assert code(result) == expected
    if expected:
        assert says in result.error.message  # type: ignore[union-attr]
    assert (requests[0].reason, requests[0].display_reason) == ("sure?", "Run echo?")


async def test_ask_without_an_approver_is_unavailable(runtime: ptc.ToolRuntime) -> None:
    async def ask(ex: Any, nxt: Any) -> Any:
        return ptc.Ask()

    runtime.on("tools/pre-execute", ask)
    result = await runtime.root.call("echo", {})
    assert code(result) == "ASK_UNAVAILABLE" and "no approver" in result.error.message  # type: ignore[union-attr]


async def test_a_pending_ask_resolves_cancelled_when_the_signal_fires() -> None:
    asked = anyio.Event()

    async def approver(request: ptc.ApprovalRequest) -> Any:
        asked.set()
        await anyio.sleep_forever()

    runtime = ptc.ToolRuntime(approver=approver)
    runtime.register(echo_tool("echo"))

    async def ask(ex: Any, nxt: Any) -> Any:
        return ptc.Ask()

    runtime.on("tools/pre-execute", ask)
    signal = ptc.CancelSignal()
    results: list[ptc.ToolResult] = []
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: _collect(runtime.root.call("echo", {}, signal=signal), results))
        await asked.wait()
        signal.cancel()
    assert code(results[0]) == "ASK_CANCELLED"


async def _collect(awaitable: Any, into: list[Any]) -> None:
    into.append(await awaitable)


@pytest.mark.parametrize("listener_result", [RuntimeError("boom"), "not a decision", None])
async def test_a_pre_execute_listener_error_fails_closed_as_denied(
    runtime: ptc.ToolRuntime, listener_result: Any
) -> None:
    async def broken(ex: Any, nxt: Any) -> Any:
        if isinstance(listener_result, Exception):
            raise listener_result
        return listener_result

    runtime.on("tools/pre-execute", broken)
    result = await runtime.root.call("echo", {})
    assert code(result) == "DENIED"
    assert "broken" in result.error.message  # type: ignore[union-attr]


async def test_listeners_run_in_registration_order_and_may_delegate(
    runtime: ptc.ToolRuntime,
) -> None:
    order: list[str] = []

    async def first(ex: Any, nxt: Any) -> Any:
        order.append("first")
        return await nxt()

    async def second(ex: Any, nxt: Any) -> Any:
        order.append("second")
        return ptc.Deny("second says no")

    runtime.on("tools/pre-execute", first)
    runtime.on("tools/pre-execute", second)
    result = await runtime.root.call("echo", {})
    assert order == ["first", "second"] and result.error.message == "second says no"  # type: ignore[union-attr]


async def test_guards_run_root_first_then_farthest_to_nearest(runtime: ptc.ToolRuntime) -> None:
    order: list[str] = []
    parent = runtime.scope("parent")
    child = parent.scope("child")
    child.guard(lambda ex: noted(order, "child", "child denies"))
    parent.guard(lambda ex: noted(order, "parent", None))
    runtime.root.guard(lambda ex: noted(order, "root", None))
    result = await child.call("echo", {})
    assert order == ["root", "parent", "child"]
    assert result.error.message == "child denies"  # type: ignore[union-attr]


async def test_guards_run_only_when_allowed(runtime: ptc.ToolRuntime) -> None:
    calls: list[Any] = []
    runtime.root.guard(lambda ex: noted(calls, ex, None))

    async def deny(ex: Any, nxt: Any) -> Any:
        return ptc.Deny("no")

    runtime.on("tools/pre-execute", deny)
    await runtime.root.call("echo", {})
    assert calls == []


async def test_a_failing_guard_denies(runtime: ptc.ToolRuntime) -> None:
    runtime.root.guard(lambda ex: str(1 / 0))
    assert code(await runtime.root.call("echo", {})) == "DENIED"


async def test_denials_still_pass_post_execute(runtime: ptc.ToolRuntime) -> None:
    seen: list[ptc.PostExecute] = []

    async def post(payload: ptc.PostExecute, nxt: Any) -> Any:
        seen.append(payload)
        return ptc.Accept(content=[{"type": "text", "text": "curated"}])

    runtime.root.guard(lambda ex: "no")
    runtime.on("tools/post-execute", post)
    result = await runtime.root.call("echo", {})
    assert code(seen[0].result) == "DENIED"
    assert code(result) == "DENIED" and result.content == [{"type": "text", "text": "curated"}]


async def test_one_token_and_one_argument_snapshot_per_call(runtime: ptc.ToolRuntime) -> None:
    seen: list[ptc.ToolExecution] = []

    async def pre(ex: Any, nxt: Any) -> Any:
        seen.append(ex)
        return await nxt()

    async def wrap(ex: Any, nxt: Any) -> Any:
        seen.append(ex)
        return await nxt()

    async def post(payload: Any, nxt: Any) -> Any:
        seen.append(payload.execution)
        return await nxt()

    runtime.on("tools/pre-execute", pre)
    runtime.on("tools/execute", wrap)
    runtime.on("tools/post-execute", post)
    arguments = {"a": [1]}
    await runtime.root.call("echo", arguments)
    await runtime.root.call("echo", arguments)
    first, second = seen[:3], seen[3:]
    assert all(ex.token is first[0].token for ex in first)
    assert all(ex.arguments is first[0].arguments for ex in first)
    assert second[0].token is not first[0].token


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=json_values)
async def test_frozen_arguments_and_results_cannot_be_mutated_by_any_listener_or_tool(
    value: Any,
) -> None:
    runtime = ptc.ToolRuntime()
    attempts: list[bool] = []

    def try_mutate(obj: Any) -> None:
        for container in _containers(obj):
            mutations: list[Callable[[Any], object]] = [
                lambda c: c.clear(),
                lambda c: c.__setitem__(0, 1),
            ]
            for mutate in mutations:
                try:
                    mutate(container)
                    attempts.append(True)
                except (TypeError, IndexError, KeyError):
                    attempts.append(False)

    async def body(arguments: Any, context: Any) -> Any:
        try_mutate(arguments)
        return arguments["v"]

    async def pre(ex: Any, nxt: Any) -> Any:
        try_mutate(ex.arguments)
        return await nxt()

    async def post(payload: Any, nxt: Any) -> Any:
        try_mutate(payload.result.value)
        try_mutate(payload.result.content)
        return await nxt()

    runtime.register(echo_tool("t", execute=body))
    runtime.on("tools/pre-execute", pre)
    runtime.on("tools/post-execute", post)
    runtime.on("tools/result", lambda result: try_mutate(result.value))
    arguments = {"v": value}
    result = await runtime.root.call("t", arguments)
    assert result.value == value
    assert True not in attempts


def _containers(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [obj, *(c for v in obj.values() for c in _containers(v))]
    if isinstance(obj, list):
        return [obj, *(c for v in obj for c in _containers(v))]
    return []


async def test_tool_exception_becomes_tool_error(runtime: ptc.ToolRuntime) -> None:
    def fail(arguments: Any, context: Any) -> Any:
        raise ValueError("disk on fire")

    runtime.register(echo_tool("fails", execute=fail))
    result = await runtime.root.call("fails", {})
    assert code(result) == "TOOL_ERROR"
    assert result.content == [{"type": "text", "text": "Error: disk on fire"}]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("text", '"text" is not of type "integer"'), (math.nan, "non-JSON"), ((1,), "non-JSON")],
)
async def test_output_validation(value: Any, fragment: str) -> None:
    runtime = ptc.ToolRuntime()

    async def body(arguments: Any, context: Any) -> Any:
        return value

    runtime.register(echo_tool("out", execute=body, output=NUMBER_OUT))
    result = await runtime.root.call("out", {})
    assert code(result) == "INVALID_OUTPUT" and fragment in result.error.message  # type: ignore[union-attr]


async def test_post_execute_replace_rules() -> None:
    runtime = ptc.ToolRuntime()

    async def body(arguments: Any, context: Any) -> Any:
        return arguments.get("n", 1)

    runtime.register(echo_tool("num", execute=body, output=NUMBER_OUT))
    decisions: list[Any] = []

    async def post(payload: Any, nxt: Any) -> Any:
        return decisions.pop(0)

    runtime.on("tools/post-execute", post)
    decisions.append(ptc.Accept(value=41))
    result = await runtime.root.call("num", {})
    assert result.value == 41 and result.content == [{"type": "text", "text": "41"}]
    decisions.append(ptc.Accept(value="not a number"))
    assert code(await runtime.root.call("num", {})) == "INVALID_OUTPUT"
    decisions.append(ptc.Accept(content=[{"type": "text", "text": "short"}]))
    result = await runtime.root.call("num", {})
    assert result.value == 1 and result.content == [{"type": "text", "text": "short"}]
    decisions.append(ptc.Accept(value=3))
    result = await runtime.root.call("num", {"n": "bad"})  # an error result
    assert code(result) == "BLOCKED" and "error result" in result.error.message  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        ptc.Accept(content=[], value=1)


@pytest.mark.parametrize(
    ("feedback", "message", "content"),
    [
        ("try again", "try again", [{"type": "text", "text": "Error: try again"}]),
        ([{"type": "text", "text": "blocks"}], "blocks", [{"type": "text", "text": "blocks"}]),
    ],
)
async def test_post_execute_block_rules(
    runtime: ptc.ToolRuntime, feedback: Any, message: str, content: Any
) -> None:
    async def post(payload: Any, nxt: Any) -> Any:
        return ptc.Block(feedback)

    runtime.on("tools/post-execute", post)
    result = await runtime.root.call("echo", {})
    assert code(result) == "BLOCKED" and result.error.message == message  # type: ignore[union-attr]
    assert result.content == content and result.value is None


async def test_a_post_execute_listener_error_fails_closed_as_blocked(
    runtime: ptc.ToolRuntime,
) -> None:
    async def post(payload: Any, nxt: Any) -> Any:
        raise RuntimeError("observer bug")

    runtime.on("tools/post-execute", post)
    result = await runtime.root.call("echo", {})
    assert code(result) == "BLOCKED" and "observer bug" in result.error.message  # type: ignore[union-attr]


async def test_an_execute_listener_error_fails_closed_as_tool_error(
    runtime: ptc.ToolRuntime,
) -> None:
    async def wrap(ex: Any, nxt: Any) -> Any:
        return "not a result"

    runtime.on("tools/execute", wrap)
    result = await runtime.root.call("echo", {})
    assert code(result) == "TOOL_ERROR" and "wrap" in result.error.message  # type: ignore[union-attr]


async def test_results_written_by_a_wrapper_are_revalidated() -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(echo_tool("num", execute=lambda a, c: 1, output=NUMBER_OUT))

    async def forge(ex: Any, nxt: Any) -> Any:
        import dataclasses

        return dataclasses.replace(await nxt(), value="forged")

    runtime.on("tools/execute", forge)
    assert code(await runtime.root.call("num", {})) == "INVALID_OUTPUT"


async def test_tools_result_listener_errors_are_caught_and_logged(
    runtime: ptc.ToolRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[ptc.ToolResult] = []

    async def broken(result: ptc.ToolResult) -> None:
        raise RuntimeError("observer down")

    runtime.on("tools/result", broken)
    runtime.on("tools/result", seen.append)
    with caplog.at_level(logging.ERROR, logger="ptc"):
        result = await runtime.root.call("echo", {"a": 1})
    assert not result.is_error and seen == [result]
    assert "observer down" in caplog.text


async def test_scoped_listeners_see_only_their_subtree(runtime: ptc.ToolRuntime) -> None:
    left, right = runtime.scope("left"), runtime.scope("right")
    below = left.scope("below")
    seen: list[str] = []
    left.on("tools/result", lambda r: seen.append(r.call_id))
    await left.call("echo", {}, call_id="left")
    await below.call("echo", {}, call_id="below")
    await right.call("echo", {}, call_id="right")
    await runtime.root.call("echo", {}, call_id="root")
    assert seen == ["left", "below"]


async def test_finalize_content_is_applied_once_at_the_end() -> None:
    runtime = ptc.ToolRuntime()
    applied: list[Any] = []

    def finalize(content: Any) -> Any:
        applied.append(content)
        return [*content, {"type": "text", "text": "(final)"}]

    runtime.register(
        ptc.define_tool(
            name="f",
            description="F.",
            input_schema={"type": "object"},
            output=ptc.Output({}, compact_json_render),
            execute=lambda a, c: "x",
            finalize_content=finalize,
        )
    )

    async def post(payload: Any, nxt: Any) -> Any:
        return ptc.Accept(content=[{"type": "text", "text": "curated"}])

    runtime.on("tools/post-execute", post)
    result = await runtime.root.call("f", {})
    assert applied == [[{"type": "text", "text": "curated"}]]
    assert result.content == [
        {"type": "text", "text": "curated"},
        {"type": "text", "text": "(final)"},
    ]


async def test_presentation_meta_only_on_direct_calls() -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(echo_tool("p", output=ptc.Output({}, compact_json_render, {"icon": "p"})))
    direct = await runtime.root.call("p", {})
    assert direct.meta == {"presentation": {"icon": "p"}}
    scope = runtime.scope("coder")
    scope.present_as("code")
    nested = Call.create(call_site(scope), "p", {}, parent=ptc.ExecutionToken())
    assert (await nested.run()).meta == {}


async def test_body_result_meta_and_body_failure_codes() -> None:
    runtime = ptc.ToolRuntime()

    async def rich(arguments: Any, context: Any) -> Any:
        if arguments.get("fail"):
            raise BodyFailure("CODE_RUN_FAILED", "code run failed (syntax): x", {"k": [1]})
        return BodyResult(value=5, meta={"stats": {"calls": 0}})

    runtime.register(echo_tool("rich", execute=rich))
    ok = await runtime.root.call("rich", {})
    assert ok.value == 5 and ok.meta == {"stats": {"calls": 0}}
    assert isinstance(ok.meta, ptc.FrozenDict)
    failed = await runtime.root.call("rich", {"fail": True})
    assert code(failed) == "CODE_RUN_FAILED" and failed.meta == {"k": [1]}
    assert failed.error.message == "code run failed (syntax): x"  # type: ignore[union-attr]
