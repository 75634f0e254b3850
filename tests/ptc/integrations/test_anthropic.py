"""``ptc.integrations.anthropic``: answering ``tool_use`` blocks of real SDK ``Message``
objects, and the beta tool runner against the SDK's client on an ``httpx2.MockTransport``
(the SDK's own HTTP layer, no network)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import anyio.from_thread
import httpx2 as httpx
import pytest
from anthropic import AsyncAnthropic
from anthropic.types import Message

import ptc
from ptc.integrations import anthropic

from .host import ANSWER, BAD_PROGRAM, FORBIDDEN, PROGRAM, Host, code_scope

pytestmark = pytest.mark.anyio


def message(*programs: str) -> Message:
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [{"type": "text", "text": "let me run this"}]
            + [
                {"type": "tool_use", "id": f"toolu_{n}", "name": "run_code", "input": {"code": p}}
                for n, p in enumerate(programs)
            ],
        }
    )


def text_of(block: dict[str, Any]) -> str:
    return "\n".join(part["text"] for part in block["content"] if part["type"] == "text")


async def test_each_tool_use_gets_a_tool_result_under_its_id() -> None:
    host = Host()
    host.defer = False
    async with code_scope(host) as scope:
        results = await anthropic.tool_results(scope, message(PROGRAM, BAD_PROGRAM, FORBIDDEN))
    ok, bad, denied = results
    assert ok["type"] == "tool_result" and ok["tool_use_id"] == "toolu_0" and "is_error" not in ok
    assert json.loads(text_of(ok)) == ANSWER
    assert bad["is_error"] is True and "ZeroDivisionError" in text_of(bad)
    assert denied["is_error"] is True and "note 13 is protected" in text_of(denied)
    assert host.call_ids() == ["toolu_0", "toolu_1", "toolu_2"]


async def test_a_message_as_a_dict_works_too() -> None:
    host = Host()
    async with code_scope(host) as scope:
        (result,) = await anthropic.tool_results(scope, message("return 2").model_dump())
    assert text_of(result) == "2"


async def test_an_approval_pauses_the_program_until_the_person_answers() -> None:
    host = Host()
    asked: list[ptc.Suspension] = []

    async def approve(paused: ptc.Suspension) -> ptc.ApprovalAnswer:
        asked.append(paused)
        return "allowed-once"

    async with code_scope(host) as scope:
        (result,) = await anthropic.tool_results(scope, message(PROGRAM), approve=approve)
    assert json.loads(text_of(result)) == ANSWER
    assert [(p.call_id, p.pending.name) for p in asked] == [("toolu_0", "delete_note")]
    assert host.ran == Counter({"read_note": 3, "delete_note": 1})


async def test_without_approve_a_paused_call_says_so_and_stays_addressable() -> None:
    host = Host()
    async with code_scope(host) as scope:
        (result,) = await anthropic.tool_results(scope, message(PROGRAM))
        assert result["is_error"] is True and "awaits a person's approval" in text_of(result)
        later = await scope.resume("toolu_0", "rejected")
    assert later.error is not None and "ASK_REJECTED" in later.error.message
    assert host.ran == Counter({"read_note": 2})


async def test_the_beta_tool_runner_runs_ptc_tools() -> None:
    host = Host()
    host.defer = False
    requests: list[dict[str, Any]] = []

    def respond(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        if len(requests) == 1:
            content: list[dict[str, Any]] = [
                {"type": "tool_use", "id": "toolu_1", "name": "run_code",
                 "input": {"code": "return tools.read_note(note_id=7)"}}
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "done"}], "end_turn"
        return httpx.Response(200, json={
            "id": f"msg_{len(requests)}", "type": "message", "role": "assistant",
            "model": "claude-test", "content": content, "stop_reason": stop,
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}})

    client = AsyncAnthropic(
        api_key="test", http_client=httpx.AsyncClient(transport=httpx.MockTransport(respond))
    )
    async with code_scope(host) as scope:
        runner = client.beta.messages.tool_runner(
            model="claude-test",
            max_tokens=100,
            messages=[{"role": "user", "content": "read note 7"}],
            tools=anthropic.tools(scope),
        )
        final = await runner.until_done()
    assert [t["name"] for t in requests[0]["tools"]] == ["run_code"]
    (tool_result,) = requests[1]["messages"][-1]["content"]
    assert tool_result["tool_use_id"] == "toolu_1"
    assert "note 7" in json.dumps(tool_result["content"])
    assert final.content[0].text == "done"  # type: ignore[union-attr]
    assert host.ran == Counter({"read_note": 1})


def test_a_sync_host_answers_through_a_portal() -> None:
    host = Host()
    host.defer = False
    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(code_scope(host)) as scope:
            (result,) = anthropic.tool_results_sync(scope, message(PROGRAM), portal=portal)
    assert json.loads(text_of(result)) == ANSWER
