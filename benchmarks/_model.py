"""The task suite with a model behind pydantic-ai: ``python -m benchmarks suite --model
PROVIDER:MODEL`` (for instance ``openai:gpt-5-mini`` or ``anthropic:claude-sonnet-4-5``).

Each task runs once per mode in a fresh runtime, as a pydantic-ai ``Agent`` whose tools are
the scope's, through ``ptc.integrations.pydantic_ai`` (native mode: the example tools; code
mode: ``run_code``). pydantic-ai reaches the provider and reads its key from the environment
as it always does (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...; install the provider's
extra, e.g. ``pydantic-ai-slim[openai]``). Reported per task and mode: the provider's own
token usage (input and output tokens, as pydantic-ai reads them from the responses), model
requests (turns), the tool calls the model made and the tool bodies that ran, wall time, and
whether the answer was right (parsed as JSON and equal to the expected answer, or else every
expected value appears in the text). Every episode's transcript (pydantic-ai's message
history as JSON) is written beside the results.

``--model test`` runs the same loop with pydantic-ai's ``FunctionModel`` playing the suite's
scripted model (the native policy turn by turn, the task's program in code mode): no
network, what the tests run. Its token counts are pydantic-ai's estimates.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

import ptc

from . import _stats
from ._episodes import runtime_kwargs
from ._tasks import Task

SYSTEM_PROMPT = (
    "You answer questions with the tools provided. When done, reply with the answer only, "
    "as compact JSON."
)


@dataclass(frozen=True, kw_only=True)
class ModelEpisode:
    task: str
    mode: str
    answer_text: str
    correct: bool
    requests: int
    input_tokens: int
    output_tokens: int
    model_tool_calls: int
    tools_executed: int
    wall_ms: float
    error: str


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a model through pydantic-ai (optional)")
    group.add_argument(
        "--model",
        default="",
        help="PROVIDER:MODEL as pydantic-ai names it (keys from the environment), or 'test' "
        "for pydantic-ai's FunctionModel playing the scripted model",
    )
    group.add_argument("--max-turns", type=int, default=12, help="model requests per episode")


def answer_mentions(expected: Any, text: str) -> bool:
    """A loose check for free-text answers: every scalar of the expected answer appears."""
    if isinstance(expected, dict):
        return all(answer_mentions(k, text) and answer_mentions(v, text)
                   for k, v in expected.items())
    if isinstance(expected, list):
        return all(answer_mentions(v, text) for v in expected)
    if isinstance(expected, float):
        return f"{expected:g}" in text or str(expected) in text
    return str(expected) in text


def is_right(expected: Any, text: str) -> bool:
    """The answer parsed as JSON equals the expected one, or it mentions every value."""
    cleaned = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
    try:
        if json.loads(cleaned) == expected:
            return True
    except ValueError:
        pass
    return answer_mentions(expected, text)


def scripted_model(task: Task, mode: str, run: int = 1) -> Any:
    """pydantic-ai's ``FunctionModel`` playing the suite's scripted model for ``task``."""
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    policy = task.native(run)
    state: dict[str, Any] = {"started": False, "ids": []}

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if mode == "code":
            if turn == 0:
                code = task.program(run)
                return ModelResponse(parts=[ToolCallPart("run_code", {"code": code})])
            return ModelResponse(parts=[TextPart(_last_return(messages))])
        try:
            if not state["started"]:
                state["started"] = True
                calls = next(policy)
            else:
                returns = {p.tool_call_id: p.content for m in messages[-1:]
                           if isinstance(m, ModelRequest) for p in m.parts
                           if isinstance(p, ToolReturnPart)}
                calls = policy.send([_parsed(returns[i]) for i in state["ids"]])
        except StopIteration as stop:
            return ModelResponse(parts=[TextPart(json.dumps(stop.value))])
        parts = [ToolCallPart(c.name, c.arguments, tool_call_id=f"t{turn}_{n}")
                 for n, c in enumerate(calls)]
        state["ids"] = [p.tool_call_id for p in parts]
        return ModelResponse(parts=list(parts))

    def _last_return(messages: list[ModelMessage]) -> str:
        for message in reversed(messages):
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart):
                        return str(part.content)
        return ""

    return FunctionModel(reply)


async def run_episode(
    model: Any, scope: ptc.Scope, task: Task, mode: str, *, max_turns: int = 12
) -> tuple[ModelEpisode, bytes]:
    """``task`` solved by ``model`` with the scope's tools; the episode and its transcript."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.usage import UsageLimits

    from ptc.integrations import pydantic_ai

    executed: list[str] = []
    dispose = scope.on("tools/result", lambda r: executed.append(r.name))
    agent = Agent(model, toolsets=[pydantic_ai.toolset(scope)], instructions=SYSTEM_PROMPT)
    started = time.perf_counter()
    error, text, transcript = "", "", b"[]"
    usage: Any = None
    messages: list[Any] = []
    try:
        result = await agent.run(task.prompt, usage_limits=UsageLimits(request_limit=max_turns))
        text, usage, messages = str(result.output), result.usage, result.all_messages()
        transcript = result.all_messages_json()
    except Exception as exc:  # a provider error, a limit: recorded, the suite goes on
        error = f"{type(exc).__name__}: {exc}"
    finally:
        dispose()
    wall_ms = (time.perf_counter() - started) * 1000
    calls = sum(isinstance(p, ToolCallPart) for m in messages if isinstance(m, ModelResponse)
                for p in m.parts)
    episode = ModelEpisode(
        task=task.name,
        mode=mode,
        answer_text=text,
        correct=not error and is_right(task.expected(1), text),
        requests=usage.requests if usage else 0,
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        model_tool_calls=calls,
        tools_executed=sum(name != "run_code" for name in executed),
        wall_ms=wall_ms,
        error=error,
    )
    return episode, transcript


def main_with_model(args: argparse.Namespace, tasks: Sequence[Task]) -> int:
    name = "test" if args.model == "test" else args.model
    slug = _slug(name)
    out = Path(args.out)
    transcripts = out / f"native_vs_code_model_{slug}_transcripts"
    model_for: Callable[[Task, str], Any] = (
        (lambda task, mode: scripted_model(task, mode)) if args.model == "test"
        else (lambda task, mode: args.model)
    )
    kwargs = runtime_kwargs(args.relaxed_containment)
    episodes = anyio.run(lambda: _run_all(model_for, tasks, kwargs, args.max_turns, transcripts))
    header = ["Task", "Mode", "Requests", "Input tokens", "Output tokens",
              "Tool calls (model / executed)", "Wall ms", "Right"]
    rows = [[e.task, e.mode, e.requests, e.input_tokens, e.output_tokens,
             f"{e.model_tool_calls} / {e.tools_executed}", e.wall_ms,
             "yes" if e.correct else f"NO {e.error}".strip()] for e in episodes]
    markdown = (f"# Native vs code mode with model `{name}` (through pydantic-ai)\n\n"
                + _stats.markdown_table(header, rows)
                + f"\nTranscripts: `{transcripts.name}/`.\n")
    payload = {"machine": _stats.machine_facts(), "model": name,
               "episodes": [asdict(e) for e in episodes]}
    paths = _stats.write_results(f"native_vs_code_model_{slug}", payload, markdown, out)
    print(markdown)
    print(f"results: {paths[0]} and {paths[1]}; transcripts in {transcripts}")
    return 0 if all(e.correct for e in episodes) or args.model != "test" else 1


def _parsed(content: Any) -> Any:
    """What the scripted model reads of a tool return: its text as JSON, else the text."""
    try:
        return json.loads(str(content))
    except ValueError:
        return str(content)


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)[:40]


async def _run_all(model_for: Callable[[Task, str], Any], tasks: Sequence[Task],
                   kwargs: dict[str, Any], max_turns: int,
                   transcripts: Path) -> list[ModelEpisode]:
    from ptc.examples import build_runtime

    await anyio.Path(transcripts).mkdir(parents=True, exist_ok=True)
    out: list[ModelEpisode] = []
    for task in tasks:
        for mode in ("native", "code"):
            # A fresh runtime per episode: job counters and caches start from zero each time.
            async with build_runtime(**kwargs) as runtime:
                scope = runtime.scope(f"model-{mode}")
                scope.present_as(mode)
                await scope.prepare()
                _stats.progress(f"model: {task.name} [{mode}]")
                await _warm(scope, mode)
                episode, transcript = await run_episode(
                    model_for(task, mode), scope, task, mode, max_turns=max_turns)
                await anyio.Path(transcripts / f"{task.name}-{mode}.json").write_bytes(transcript)
                out.append(episode)
    return out


async def _warm(scope: ptc.Scope, mode: str) -> None:
    """In code mode, one run before the episode: the episode does not pay the worker
    pool's start."""
    if mode == "code":
        await scope.run_code("return None")
