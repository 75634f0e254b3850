"""``ptc.integrations.openai_agents`` driven by the Agents SDK's own ``ScriptedModel``: a full
``Runner.run`` loop per case, interruptions and ``RunState.approve/reject``, no network."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from agents import Agent, FunctionTool, Runner, set_tracing_disabled
from agents.strict_schema import ensure_strict_json_schema
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

import ptc
from ptc.integrations import openai_agents

from .host import ANSWER, BAD_PROGRAM, FORBIDDEN, PROGRAM, STUCK, Host, code_scope

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_trace_export() -> Iterator[None]:
    set_tracing_disabled(True)  # the SDK would otherwise try to upload traces
    yield


def outputs(call: ModelCall) -> list[str]:
    items = call.input if isinstance(call.input, list) else []
    return [
        str(i["output"])
        for i in items
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]


def scripted(*programs: str, seen: list[ModelCall] | None = None) -> ScriptedModel:
    """Each program as a run_code call, then an answer repeating the last tool output."""
    calls = seen if seen is not None else []

    def program_step(n: int, code: str) -> ModelStep:
        def respond(call: ModelCall) -> Any:
            calls.append(call)
            return [function_call("run_code", {"code": code}, call_id=f"tc_{n}")]

        return ModelStep.respond(respond)

    def answer(call: ModelCall) -> Any:
        calls.append(call)
        return [assistant_message((outputs(call) or [""])[-1])]

    return ScriptedModel([*(program_step(n, p) for n, p in enumerate(programs)),
                          ModelStep.respond(answer)])


def agent_for(scope: ptc.Scope, model: ScriptedModel) -> Agent[Any]:
    return Agent(name="notes", model=model, tools=openai_agents.function_tools(scope))


async def test_a_plain_run_shows_run_code_only_and_routes_the_framework_call_id() -> None:
    host = Host()
    host.defer = False
    seen: list[ModelCall] = []
    async with code_scope(host) as scope:
        result = await Runner.run(agent_for(scope, scripted(PROGRAM, seen=seen)), "tidy")
        tools = seen[0].tools
        assert [t.name for t in tools] == ["run_code"]
        assert isinstance(tools[0], FunctionTool)
        assert tools[0].description == scope.model_tools()[0]["description"]
    assert json.loads(result.final_output) == ANSWER
    assert host.call_ids() == ["tc_0"]  # once: the program ran in the approval check only
    assert host.ran == Counter({"read_note": 3, "delete_note": 1})


async def test_failing_programs_are_outputs_the_model_reads() -> None:
    host = Host()
    async with code_scope(host) as scope:
        model = scripted(BAD_PROGRAM, BAD_PROGRAM, BAD_PROGRAM, "return 'ok'")
        result = await Runner.run(agent_for(scope, model), "divide")
    assert result.final_output == "ok"
    failures = [o for o in outputs(model.calls[-1]) if "ZeroDivisionError" in o]
    assert len(failures) == 3 and all(o.startswith("Error: code run failed") for o in failures)


async def test_a_denied_nested_call_is_an_error_the_model_reads() -> None:
    host = Host()
    async with code_scope(host) as scope:
        result = await Runner.run(agent_for(scope, scripted(FORBIDDEN)), "delete 13")
    assert "DENIED" in result.final_output and "note 13 is protected" in result.final_output
    assert host.ran["delete_note"] == 0


async def test_an_approval_interrupts_and_resumes_through_run_state_approve() -> None:
    host = Host()
    async with code_scope(host) as scope:
        agent = agent_for(scope, scripted(PROGRAM))
        first = await Runner.run(agent, "tidy")
        (item,) = first.interruptions
        assert item.tool_name == "run_code" and item.raw_item.call_id == "tc_0"  # type: ignore[union-attr]
        assert scope.suspension("tc_0") is not None
        assert host.ran == Counter({"read_note": 2})  # paused before the delete
        state = first.to_state()
        state.approve(item)
        second = await Runner.run(agent, state)
        assert scope.suspension("tc_0") is None
    assert json.loads(second.final_output) == ANSWER
    assert host.ran == Counter({"read_note": 3, "delete_note": 1})  # every body exactly once


async def test_a_rejection_drops_the_paused_run_and_nothing_more_runs() -> None:
    host = Host()
    async with code_scope(host) as scope:
        agent = agent_for(scope, scripted(PROGRAM, "return 'after'"))
        first = await Runner.run(agent, "tidy")
        state = first.to_state()
        state.reject(first.interruptions[0])
        second = await Runner.run(agent, state)
        assert scope.suspension("tc_0") is None
    assert second.final_output == "after"
    assert host.ran == Counter({"read_note": 2})


async def test_a_second_pause_in_an_approved_program_is_answered_cancelled() -> None:
    host = Host()
    twice = "tools.delete_note(note_id=1)\nreturn tools.delete_note(note_id=2)"
    async with code_scope(host) as scope:
        agent = agent_for(scope, scripted(twice))
        first = await Runner.run(agent, "delete both")
        state = first.to_state()
        state.approve(first.interruptions[0])
        second = await Runner.run(agent, state)
        assert scope.suspension("tc_0") is None
    assert "ASK_CANCELLED" in second.final_output
    assert host.ran == Counter({"delete_note": 1})


async def test_the_tool_list_follows_tools_change() -> None:
    host = Host()
    host.defer = False
    seen: list[ModelCall] = []
    async with code_scope(host) as scope:
        agent = agent_for(scope, scripted("return 1", seen=seen))

        @scope.tool
        def archive_note(note_id: int) -> str:
            """Archive a note."""
            return "archived"

        await Runner.run(agent, "go")
    tool = seen[0].tools[0]
    assert isinstance(tool, FunctionTool) and "archive_note" in tool.description


async def test_strict_schemas_survive_the_sdks_strict_conversion_unchanged() -> None:
    host = Host()
    async with code_scope(host) as scope:
        native = scope.scope("native")
        native.present_as("native")
        tools = openai_agents.function_tools(native)
    for tool in tools:
        assert isinstance(tool, FunctionTool) and tool.strict_json_schema
        schema = json.loads(json.dumps(tool.params_json_schema))
        assert ensure_strict_json_schema(json.loads(json.dumps(schema))) == schema


async def test_cancelling_the_runner_aborts_the_program_and_reports_it() -> None:
    host = Host()
    host.defer = False
    async with code_scope(host) as scope:
        agent = agent_for(scope, scripted(STUCK))
        async with anyio.create_task_group() as group:
            group.start_soon(host.cancel_when_waiting, group.cancel_scope)
            await Runner.run(agent, "wait")
    assert host.codes() == {"tc_0:ptc:1": "ABORTED", "tc_0": "ABORTED"}
