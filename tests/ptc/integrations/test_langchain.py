"""``ptc.integrations.langchain`` in a LangChain agent (``create_agent``, a LangGraph graph)
driven by LangChain's own ``GenericFakeChatModel``, sync and async; approvals through
LangGraph ``interrupt()`` and ``Command(resume=...)``; no network."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.to_thread
import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import ptc
from ptc.integrations import langchain

from .host import ANSWER, BAD_PROGRAM, FORBIDDEN, PROGRAM, STUCK, Host, code_scope

pytestmark = pytest.mark.anyio


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model; binding tools records them (the fake sends what it is
    scripted to send, whatever the tools)."""

    bound: list[Any] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound.extend(tools)
        return self


def model(*programs: str) -> ScriptedChat:
    calls = [
        AIMessage("", tool_calls=[{"name": "run_code", "args": {"code": p}, "id": f"tc_{n}"}])
        for n, p in enumerate(programs)
    ]
    return ScriptedChat(messages=iter([*calls, AIMessage("done")]))


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


Invoke = Callable[[Any, Any, dict[str, Any]], Any]


async def invoke_async(agent: Any, payload: Any, config: dict[str, Any]) -> Any:
    return await agent.ainvoke(payload, config)


async def invoke_sync(agent: Any, payload: Any, config: dict[str, Any]) -> Any:
    # The sync path from another thread, as a sync host or a framework thread pool calls it.
    return await anyio.to_thread.run_sync(lambda: agent.invoke(payload, config))


MODES = pytest.mark.parametrize("run", [invoke_async, invoke_sync], ids=["async", "sync"])


@MODES
async def test_a_plain_run_routes_the_tool_call_id_and_keeps_the_result(run: Any) -> None:
    host = Host()
    host.defer = False
    async with code_scope(host) as scope:
        chat = model(PROGRAM)
        tools = langchain.tools(scope)
        assert [t.name for t in tools] == ["run_code"]
        state = await run(create_agent(chat, tools=tools), {"messages": "tidy"}, {})
    (message,) = tool_messages(state)
    assert json.loads(str(message.content)) == ANSWER and message.tool_call_id == "tc_0"
    assert message.status == "success" and message.artifact["call_id"] == "tc_0"
    assert json.loads(json.dumps(message.artifact))["meta"]["stats"]["calls"] == 4
    assert host.call_ids() == ["tc_0"]
    assert host.ran == Counter({"read_note": 3, "delete_note": 1})


@MODES
async def test_errors_and_denials_are_error_tool_messages(run: Any) -> None:
    host = Host()
    async with code_scope(host) as scope:
        agent = create_agent(model(BAD_PROGRAM, FORBIDDEN), tools=langchain.tools(scope))
        state = await run(agent, {"messages": "go"}, {})
    bad, denied = tool_messages(state)
    assert bad.status == "error" and "ZeroDivisionError" in str(bad.content)
    assert denied.status == "error" and "note 13 is protected" in str(denied.content)
    assert host.ran["delete_note"] == 0


@MODES
async def test_an_approval_interrupts_and_resumes_with_each_body_run_once(run: Any) -> None:
    host = Host()
    twice = "tools.read_note(note_id=1)\ntools.delete_note(note_id=1)\n" + PROGRAM
    async with code_scope(host) as scope:
        agent = create_agent(
            model(twice), tools=langchain.tools(scope), checkpointer=InMemorySaver()
        )
        config = {"configurable": {"thread_id": "t1"}}
        state = await run(agent, {"messages": "tidy"}, config)
        (first,) = state["__interrupt__"]
        assert first.value["tool"] == "delete_note" and first.value["arguments"] == {"note_id": 1}
        assert host.ran == Counter({"read_note": 1})
        state = await run(agent, Command(resume="allowed-once"), config)
        (second,) = state["__interrupt__"]  # the same program pauses again
        assert second.value["arguments"] == {"note_id": 2}
        assert host.ran == Counter({"read_note": 3, "delete_note": 1})
        state = await run(agent, Command(resume="allowed-once"), config)
    (message,) = tool_messages(state)
    assert json.loads(str(message.content)) == ANSWER
    # LangGraph re-ran the tool on each resume; no body ran twice.
    assert host.ran == Counter({"read_note": 4, "delete_note": 2})
    assert scope.suspension("tc_0") is None


@MODES
async def test_a_rejection_resumes_the_program_with_ask_rejected(run: Any) -> None:
    host = Host()
    async with code_scope(host) as scope:
        agent = create_agent(
            model(PROGRAM), tools=langchain.tools(scope), checkpointer=InMemorySaver()
        )
        config = {"configurable": {"thread_id": "t2"}}
        await run(agent, {"messages": "tidy"}, config)
        state = await run(agent, Command(resume="rejected"), config)
    (message,) = tool_messages(state)
    assert message.status == "error" and "ASK_REJECTED" in str(message.content)
    assert host.ran == Counter({"read_note": 2})


async def test_a_new_list_after_a_tool_change_has_the_new_description() -> None:
    host = Host()
    async with code_scope(host) as scope:
        before = langchain.tools(scope)[0].description

        @scope.tool
        def archive_note(note_id: int) -> str:
            """Archive a note."""
            return "archived"

        await scope.prepare()
        after = langchain.tools(scope)[0].description
    assert "archive_note" not in before and "archive_note" in after


def test_sync_use_without_the_runtimes_loop_says_what_to_do() -> None:
    async def build() -> list[langchain.PtcTool]:
        host = Host()
        async with code_scope(host) as scope:
            return langchain.tools(scope)

    tools = anyio.run(build)
    tools[0].token = None
    with pytest.raises(ptc.UsageError, match="portal="):
        tools[0].invoke({"code": "return 1"})


async def test_cancelling_ainvoke_aborts_the_program_and_reports_it() -> None:
    host = Host()
    async with code_scope(host) as scope:
        agent = create_agent(model(STUCK), tools=langchain.tools(scope))
        async with anyio.create_task_group() as group:
            group.start_soon(host.cancel_when_waiting, group.cancel_scope)
            await invoke_async(agent, {"messages": "wait"}, {})
    assert host.codes() == {"tc_0:ptc:1": "ABORTED", "tc_0": "ABORTED"}
