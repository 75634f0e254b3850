"""One session per conversation, in each framework: the second step of a conversation reads
what its first step kept, and another conversation (another session) does not see it.
Driven by each framework's own test model, as the other adapter tests are."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, Runner, set_tracing_disabled
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent as PydanticAgent

import ptc
from ptc.integrations import anthropic, langchain, openai_agents, pydantic_ai

from . import test_anthropic, test_langchain, test_openai_agents, test_pydantic_ai
from .host import Host, code_scope

pytestmark = pytest.mark.anyio

FETCH = "notes = [tools.read_note(note_id=n) for n in (1, 2)]\nprint(len(notes))"
USE = "return notes[-1] if 'notes' in globals() else 'nothing kept'"


async def test_pydantic_ai_one_session_per_conversation() -> None:
    host = Host()
    async with code_scope(host) as scope:
        first = scope.session()
        model, infos, _ = test_pydantic_ai.scripted(FETCH, USE)
        agent = PydanticAgent(model, toolsets=[pydantic_ai.toolset(first)])
        assert (await agent.run("read my notes")).output == "note 2"
        assert "persist" in (infos[0].function_tools[0].description or "")
        other, _, _ = test_pydantic_ai.scripted(USE)
        fresh = PydanticAgent(other, toolsets=[pydantic_ai.toolset(scope.session())])
        assert (await fresh.run("again")).output == "nothing kept"


async def test_openai_agents_one_session_per_conversation() -> None:
    set_tracing_disabled(True)
    host = Host()
    async with code_scope(host) as scope:
        model = test_openai_agents.scripted(FETCH, USE)
        tools = openai_agents.function_tools(scope.session())
        result = await Runner.run(Agent(name="notes", model=model, tools=tools), "read")
        assert result.final_output == "note 2"
        other = test_openai_agents.scripted(USE)
        tools = openai_agents.function_tools(scope.session())
        result = await Runner.run(Agent(name="notes", model=other, tools=tools), "again")
        assert result.final_output == "nothing kept"


async def test_langgraph_one_session_per_thread_id() -> None:
    host = Host()
    async with code_scope(host) as scope:
        tools = langchain.tools(scope, per_thread=True)
        assert "reset" in json.dumps(tools[0].args_schema)
        memory = InMemorySaver()

        async def run(programs: tuple[str, ...], thread: str) -> Any:
            agent = create_agent(
                test_langchain.model(*programs), tools=tools, checkpointer=memory
            )
            config = {"configurable": {"thread_id": thread}}
            return await test_langchain.invoke_async(agent, {"messages": "notes"}, config)

        await run((FETCH,), "a")
        a = await run((USE,), "a")
        b = await run((USE,), "b")
    assert test_langchain.tool_messages(a)[-1].content == "note 2"
    assert test_langchain.tool_messages(b)[-1].content == "nothing kept"


async def test_langchain_tools_of_a_session_and_per_thread_needs_a_scope() -> None:
    host = Host()
    async with code_scope(host) as scope:
        session = scope.session()
        await langchain.tools(session)[0].ainvoke({"code": "x = 'kept'"})
        assert await langchain.tools(session)[0].ainvoke({"code": "return x"}) == "kept"
        with pytest.raises(ptc.UsageError, match="per_thread=True takes a ptc.Scope"):
            langchain.tools(session, per_thread=True)


async def test_anthropic_one_session_per_conversation() -> None:
    host = Host()
    async with code_scope(host) as scope:
        conversation = scope.session()
        await anthropic.tool_results(conversation, test_anthropic.message(FETCH))
        (kept,) = await anthropic.tool_results(conversation, test_anthropic.message(USE))
        (other,) = await anthropic.tool_results(scope.session(), test_anthropic.message(USE))
        (spec,) = anthropic.tools(conversation)
        assert "reset" in json.dumps(spec.to_dict())
    assert test_anthropic.text_of(kept) == "note 2"
    assert test_anthropic.text_of(other) == "nothing kept"


@pytest.mark.parametrize(
    "adapter",
    [pydantic_ai.toolset, openai_agents.function_tools, langchain.tools, anthropic.tools],
)
def test_each_adapter_refuses_what_is_neither_a_scope_nor_a_session(adapter: Any) -> None:
    with pytest.raises(ptc.UsageError, match="takes a ptc.Scope or a ptc.Session"):
        adapter(object())
