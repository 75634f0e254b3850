"""docs/integrations.md's approval flows run as written, each in its framework's own loop
against that framework's scripted test model: the namespace gives each block what the
document leaves to the reader (``model``, ``scope``, ``client``, ``ask_a_person``, ``path``,
``runtime``, ``exporter``), and the test checks what the reader is promised: the paused
program resumes, every tool body runs exactly once, the model reads the program's answer."""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from agents import set_tracing_disabled
from anthropic import AsyncAnthropic
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ptc
from ptc.integrations import anthropic, langchain, openai_agents, opentelemetry, pydantic_ai

from .host import ANSWER, PROGRAM, Host, code_scope
from .test_langchain import model as langchain_model
from .test_openai_agents import scripted as openai_agents_model
from .test_pydantic_ai import scripted as pydantic_ai_model

pytestmark = pytest.mark.anyio

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"
MARKER = "<!-- docs-test: tests/ptc/integrations/test_doc_blocks.py -->"
# What tells each marked block apart, in the document's order.
KEYS = (
    "ptc.FileSuspensionStore",
    "DeferredToolResults",
    "state.approve",
    "Command(resume=",
    "anthropic.tool_results",
    "opentelemetry.instrument",
)
# The same program, pausing before each of its two deletes.
TWICE = "tools.delete_note(note_id=1)\n" + PROGRAM
PAUSES = pytest.mark.parametrize(
    ("program", "deleted"), [(PROGRAM, [2]), (TWICE, [1, 2])], ids=["one-pause", "two-pauses"]
)


def marked_blocks() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return re.findall(re.escape(MARKER) + r"\n```python\n(.*?)```", text, flags=re.S)


def start_block(key: str, namespace: dict[str, Any]) -> Awaitable[None] | None:
    """Run the block holding ``key`` as written in ``namespace``: done, or, if it awaits
    (top-level ``await``), the awaitable that runs it."""
    (block,) = [b for b in marked_blocks() if key in b]
    code = compile(block, f"{DOC.name} ({key})", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    started = eval(code, namespace)  # noqa: S307 - the documentation's own code
    return started if code.co_flags & inspect.CO_COROUTINE else None


async def run_block(key: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run the block holding ``key`` to its end; the namespace, with what it left there."""
    started = start_block(key, namespace)
    if started is not None:
        await started
    return namespace


def test_every_block_marked_for_this_module_runs_here() -> None:
    assert [[k for k in KEYS if k in block] for block in marked_blocks()] == [[k] for k in KEYS]


@pytest.mark.needs_root
async def test_a_deferring_approver_leaves_a_paused_run_that_a_restarted_host_resumes(
    tmp_path: Path,
) -> None:
    host = Host()
    paused_runs = tmp_path / "paused"

    async def new_runtime() -> ptc.ToolRuntime:
        done = await run_block("ptc.FileSuspensionStore", {"ptc": ptc, "path": paused_runs})
        runtime: ptc.ToolRuntime = done["runtime"]
        return runtime

    def agent(runtime: ptc.ToolRuntime) -> ptc.Scope:
        host.install(runtime)
        scope = runtime.scope("agent")
        scope.present_as("code")
        return scope

    async with await new_runtime() as runtime:
        paused = await agent(runtime).run_code(PROGRAM, call_id="tc_0")
    assert paused.error is not None and paused.error.code == "SUSPENDED"
    assert len(list(paused_runs.glob("*.json"))) == 1
    async with await new_runtime() as runtime:  # the host restarted, same directory
        done = await agent(runtime).resume("tc_0", "allowed-once")
    assert isinstance(done.value, dict) and done.value["result"] == ANSWER
    assert host.ran == Counter({"read_note": 3, "delete_note": 1})
    assert list(paused_runs.glob("*.json")) == []


@PAUSES
async def test_pydantic_ai_deferred_tool_results(program: str, deleted: list[int]) -> None:
    host = Host()
    async with code_scope(host) as scope:
        model, _, _ = pydantic_ai_model(program)
        namespace = {"pydantic_ai": pydantic_ai, "model": model, "scope": scope}
        done = await run_block("DeferredToolResults", namespace)
        assert scope.suspension("tc_0") is None
    assert json.loads(done["result"].output) == ANSWER
    assert done["pending"]["tool"] == "delete_note"
    assert done["pending"]["arguments"] == {"note_id": deleted[-1]}
    assert host.ran == Counter({"read_note": 3, "delete_note": len(deleted)})


async def test_openai_agents_interruptions_and_state_approve() -> None:
    set_tracing_disabled(True)  # the SDK would otherwise try to upload traces
    host = Host()
    async with code_scope(host) as scope:
        model = openai_agents_model(PROGRAM)
        namespace = {"openai_agents": openai_agents, "model": model, "scope": scope}
        done = await run_block("state.approve", namespace)
        assert scope.suspension("tc_0") is None
    assert json.loads(done["result"].final_output) == ANSWER
    assert host.ran == Counter({"read_note": 3, "delete_note": 1})


@PAUSES
async def test_langgraph_interrupt_and_command_resume(program: str, deleted: list[int]) -> None:
    host = Host()
    async with code_scope(host) as scope:
        namespace = {"langchain": langchain, "model": langchain_model(program), "scope": scope}
        done = await run_block("Command(resume=", namespace)
        assert scope.suspension("tc_0") is None
    (answer,) = [m for m in done["state"]["messages"] if m.type == "tool"]
    assert json.loads(answer.content) == ANSWER
    assert done["pending"]["arguments"] == {"note_id": deleted[-1]}
    # LangGraph re-ran the tool on every resume; no tool body ran twice.
    assert host.ran == Counter({"read_note": 3, "delete_note": len(deleted)})


def anthropic_client(*programs: str) -> tuple[AsyncAnthropic, list[dict[str, Any]]]:
    """The SDK's client over a transport that answers each request with the next program as
    a run_code ``tool_use``, then with the text of the last ``tool_result`` it was sent."""
    requests: list[dict[str, Any]] = []

    def respond(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        turn = len(requests) - 1
        content: list[dict[str, Any]]
        if turn < len(programs):
            use = {"type": "tool_use", "id": f"toolu_{turn}", "name": "run_code"}
            content, stop = [{**use, "input": {"code": programs[turn]}}], "tool_use"
        else:
            (result,) = body["messages"][-1]["content"]
            content, stop = [{"type": "text", "text": result["content"][0]["text"]}], "end_turn"
        return httpx.Response(
            200,
            json={
                "id": f"msg_{turn}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )

    transport = httpx.MockTransport(respond)
    client = AsyncAnthropic(api_key="test", http_client=httpx.AsyncClient(transport=transport))
    return client, requests


@PAUSES
async def test_anthropic_tool_results_loop(program: str, deleted: list[int]) -> None:
    host = Host()
    asked: list[ptc.Suspension] = []

    async def ask_a_person(paused: ptc.Suspension) -> ptc.ApprovalAnswer:
        asked.append(paused)
        return "allowed-once"

    client, requests = anthropic_client(program)
    async with code_scope(host) as scope:
        namespace = {
            "anthropic": anthropic,
            "client": client,
            "scope": scope,
            "ask_a_person": ask_a_person,
        }
        done = await run_block("anthropic.tool_results", namespace)
        assert scope.suspension("toolu_0") is None
    assert json.loads(done["response"].content[0].text) == ANSWER
    assert [t["name"] for t in requests[0]["tools"]] == ["run_code"]
    assert [p.pending.arguments for p in asked] == [{"note_id": n} for n in deleted]
    assert host.ran == Counter({"read_note": 3, "delete_note": len(deleted)})


async def test_opentelemetry_instrument() -> None:
    host = Host()
    namespace: dict[str, Any] = {"opentelemetry": opentelemetry, "exporter": InMemorySpanExporter()}

    def instrument(runtime: ptc.ToolRuntime) -> None:  # before the host's own listeners
        namespace["runtime"] = runtime
        assert start_block("opentelemetry.instrument", namespace) is None  # it awaits nothing

    try:
        async with code_scope(host, instrument) as scope:
            paused = await scope.run_code(PROGRAM, call_id="tc_0")
            assert paused.error is not None and paused.error.code == "SUSPENDED"
            await scope.resume("tc_0", "allowed-once")
            namespace["dispose"]()
            await scope.run_code("return 1", call_id="untraced")
        namespace["provider"].force_flush()
    finally:
        if "provider" in namespace:
            namespace["provider"].shutdown()
    spans = namespace["exporter"].get_finished_spans()
    runs = [s.attributes for s in spans if s.name == "execute_tool run_code"]
    assert [(a["gen_ai.tool.call.id"], a.get("error.type")) for a in runs] == [
        ("tc_0", "SUSPENDED"),
        ("tc_0", None),
    ]
    deletes = [s.attributes for s in spans if s.name == "execute_tool delete_note"]
    assert [a.get("error.type") for a in deletes] == ["ABANDONED", None]
