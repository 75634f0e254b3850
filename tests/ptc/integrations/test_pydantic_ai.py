"""``ptc.integrations.pydantic_ai`` driven by pydantic-ai's own ``FunctionModel``: a full
agent loop per case, no network, nothing of the framework mocked."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied

import ptc
from ptc.integrations import pydantic_ai

from .host import ANSWER, BAD_PROGRAM, FORBIDDEN, PROGRAM, STUCK, Host, code_scope

pytestmark = pytest.mark.anyio


def scripted(*programs: str) -> tuple[FunctionModel, list[AgentInfo], list[str]]:
    """A model that sends each program in turn as a run_code call, then answers with the
    last tool return it read; it records what it was shown and what it read."""
    infos: list[AgentInfo] = []
    returns: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        infos.append(info)
        last = messages[-1]
        if isinstance(last, ModelRequest):
            returns.extend(str(p.content) for p in last.parts if isinstance(p, ToolReturnPart))
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < len(programs):
            args = {"code": programs[turn]}
            return ModelResponse(parts=[ToolCallPart("run_code", args, tool_call_id=f"tc_{turn}")])
        return ModelResponse(parts=[TextPart(returns[-1] if returns else "")])

    return FunctionModel(model), infos, returns


def agent_for(model: FunctionModel, scope: ptc.Scope, **options: Any) -> Agent[None, Any]:
    return Agent(
        model,
        toolsets=[pydantic_ai.toolset(scope, **options)],
        output_type=[str, DeferredToolRequests],
    )


async def test_a_plain_run_shows_run_code_only_and_routes_the_framework_call_id() -> None:
    host = Host()
    host.defer = False
    async with code_scope(host) as scope:
        model, infos, _ = scripted(PROGRAM)
        result = await agent_for(model, scope).run("tidy my notes")
    assert [t.name for t in infos[0].function_tools] == ["run_code"]
    assert infos[0].function_tools[0].description == scope.model_tools()[0]["description"]
    assert json.loads(result.output) == ANSWER
    assert host.call_ids() == ["tc_0"]
    assert host.ran == Counter({"read_note": 3, "delete_note": 1})


async def test_failing_programs_reach_the_model_without_ending_the_run() -> None:
    host = Host()
    async with code_scope(host) as scope:
        model, _, returns = scripted(BAD_PROGRAM, BAD_PROGRAM, BAD_PROGRAM, "return 'ok'")
        result = await agent_for(model, scope).run("divide")
    # Three failures in a row: pydantic-ai's retry path would have ended the run at two.
    assert result.output == "ok"
    assert all("ZeroDivisionError" in text for text in returns[:3])
    assert all(text.startswith("Error: code run failed (exception)") for text in returns[:3])


async def test_a_denied_nested_call_is_an_error_the_model_reads() -> None:
    host = Host()
    async with code_scope(host) as scope:
        model, _, returns = scripted(FORBIDDEN)
        await agent_for(model, scope).run("delete 13")
    assert "DENIED" in returns[0] and "note 13 is protected" in returns[0]
    assert host.ran["delete_note"] == 0


async def test_an_approval_pauses_the_run_and_resumes_through_deferred_tool_results() -> None:
    host = Host()
    async with code_scope(host) as scope:
        model, _, _ = scripted(PROGRAM)
        agent = agent_for(model, scope)
        first = await agent.run("tidy my notes")
        assert isinstance(first.output, DeferredToolRequests)
        (call,) = first.output.approvals
        assert call.tool_call_id == "tc_0"
        pending = first.output.metadata["tc_0"]
        assert pending["tool"] == "delete_note" and pending["arguments"] == {"note_id": 2}
        assert host.ran == Counter({"read_note": 2})  # paused before the delete
        second = await agent.run(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"tc_0": True}),
        )
    assert json.loads(second.output) == ANSWER
    assert host.ran == Counter({"read_note": 3, "delete_note": 1})  # every body exactly once
    assert scope.suspension("tc_0") is None


async def test_a_denial_through_tool_denied_drops_the_paused_run() -> None:
    host = Host()
    async with code_scope(host) as scope:
        model, _, returns = scripted(PROGRAM)
        agent = agent_for(model, scope)
        first = await agent.run("tidy my notes")
        assert scope.suspension("tc_0") is not None
        denied = DeferredToolResults(approvals={"tc_0": ToolDenied("not today")})
        await agent.run(message_history=first.all_messages(), deferred_tool_results=denied)
        assert scope.suspension("tc_0") is None
    assert returns[-1] == "not today"
    assert host.ran == Counter({"read_note": 2})


async def test_a_tool_change_shows_in_the_next_request() -> None:
    host = Host()
    host.defer = False
    async with code_scope(host) as scope:
        descriptions: list[str] = []

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            descriptions.append(str(info.function_tools[0].description))
            if len(descriptions) == 1:
                scope.register(ptc.tool(archive_note))
                return ModelResponse(parts=[ToolCallPart("run_code", {"code": "return 1"})])
            return ModelResponse(parts=[TextPart("done")])

        await agent_for(FunctionModel(model), scope).run("go")
    assert "archive_note" not in descriptions[0] and "archive_note" in descriptions[1]


def archive_note(note_id: int) -> str:
    """Archive a note."""
    return f"archived {note_id}"


async def test_strict_schemas_pass_pydantic_ais_openai_strict_checks() -> None:
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

    host = Host()
    async with code_scope(host) as scope:
        tools = await pydantic_ai.toolset(scope, strict=True).get_tools(_ctx())
    (tool,) = tools.values()
    assert tool.tool_def.strict is True
    transformer = OpenAIJsonSchemaTransformer(dict(tool.tool_def.parameters_json_schema))
    transformer.walk()
    assert transformer.is_strict_compatible


def _ctx() -> Any:
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    return RunContext(deps=None, model=TestModel(), usage=RunUsage())


_: Callable[..., Any] = scripted


async def test_cancelling_the_agent_run_aborts_the_program_and_reports_it() -> None:
    host = Host()
    async with code_scope(host) as scope:
        model, _, _ = scripted(STUCK)
        agent = agent_for(model, scope)
        async with anyio.create_task_group() as group:
            group.start_soon(host.cancel_when_waiting, group.cancel_scope)
            await agent.run("wait")
    assert host.codes() == {"tc_0:ptc:1": "ABORTED", "tc_0": "ABORTED"}


async def test_a_programs_output_reaches_the_runs_event_stream() -> None:
    host = Host()
    events: list[pydantic_ai.CodeOutputEvent] = []
    async with code_scope(host) as scope:
        model, _, _ = scripted("print('one')\nprint('two')\nreturn 3")
        agent = agent_for(model, scope)
        async with agent.iter("count") as run:
            async for node in run:
                if Agent.is_call_tools_node(node):
                    async with node.stream(run.ctx) as stream:
                        events.extend(
                            [e async for e in stream if isinstance(e, pydantic_ai.CodeOutputEvent)]
                        )
    assert [(e.text, e.tool_call_id) for e in events] == [("one\n", "tc_0"), ("two\n", "tc_0")]
