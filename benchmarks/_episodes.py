"""Running one task in one mode against a scope, with the scripted model, and measuring it.

Context accounting (what a model would read; the same rules in both modes):
- the tool specs sent (``scope.model_tools(format="openai")`` as JSON: in code mode
  ``run_code``'s description is what the model reads of the SDK) and the user prompt;
- every call the model emits (``{"name", "arguments"}`` as JSON), every tool result's content
  text, and the final answer (as JSON).
``context_bytes`` is the final conversation size; ``input_bytes_all_turns`` adds up the context
re-read at every model turn (what an API without prompt caching bills). Tokens are an
estimate: bytes / 4.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import ptc

from ._tasks import JSON, Call, Task


class EpisodeError(Exception):
    """A tool or a run failed where the scripted model expected success."""


@dataclass(frozen=True, kw_only=True)
class Episode:
    task: str
    mode: str
    answer: JSON
    correct: bool
    model_turns: int
    context_bytes: int
    input_bytes_all_turns: int
    model_tool_calls: int
    tool_calls_executed: int
    wall_ms: float
    run_code_ms: float | None

    def wall_ms_at(self, model_latency_ms: float) -> float:
        """Wall time with a simulated model latency per turn (computed, not slept)."""
        return self.wall_ms + self.model_turns * model_latency_ms


def runtime_kwargs(relaxed: bool) -> dict[str, Any]:
    """``ToolRuntime`` options for the suites: ``relaxed`` requires no containment dimension."""
    return {"containment": ptc.Containment(require=frozenset())} if relaxed else {}


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def content_text(result: ptc.ToolResult) -> str:
    return "".join(
        str(block.get("text", "")) for block in result.content if block.get("type") == "text"
    )


def spec_bytes(scope: Any) -> int:
    """Bytes of the tool specs a model is sent for ``scope`` (``run_code``'s description
    carries what the model reads of the SDK: every stub inline, or the how-to and the
    pinned stubs in search discovery)."""
    return _json_bytes(scope.model_tools(format="openai"))


def _read(result: ptc.ToolResult) -> JSON:
    """What the scripted model takes from a result: its content text parsed as JSON."""
    if result.is_error:
        raise EpisodeError(f"{result.name} failed: {content_text(result)}")
    try:
        return json.loads(content_text(result))
    except ValueError:
        return result.value


async def run_native(scope: Any, task: Task, run: int, specs: int) -> Episode:
    policy = task.native(run)
    context = specs + len(task.prompt.encode())
    all_turns = turns = executed = 0
    started = time.perf_counter()
    calls: list[Call] = next(policy)
    while True:
        turns += 1
        all_turns += context
        context += _json_bytes([{"name": c.name, "arguments": c.arguments} for c in calls])
        results = await scope.call_many([ptc.ToolCall(c.name, c.arguments) for c in calls])
        executed += len(calls)
        context += sum(len(content_text(r).encode()) for r in results)
        try:
            calls = policy.send([_read(r) for r in results])
        except StopIteration as stop:
            answer = stop.value
            break
    wall_ms = (time.perf_counter() - started) * 1000
    turns += 1  # the turn that writes the final answer
    all_turns += context
    context += _json_bytes(answer)
    return Episode(task=task.name, mode="native", answer=answer,
                   correct=answer == task.expected(run), model_turns=turns,
                   context_bytes=context, input_bytes_all_turns=all_turns,
                   model_tool_calls=executed, tool_calls_executed=executed,
                   wall_ms=wall_ms, run_code_ms=None)


async def run_code(scope: Any, task: Task, run: int, specs: int) -> Episode:
    program = task.program(run)
    context = specs + len(task.prompt.encode())
    all_turns = context  # turn 1 reads the prompt and writes the run_code call
    context += _json_bytes({"name": "run_code", "arguments": {"code": program}})
    started = time.perf_counter()
    result = await scope.call("run_code", {"code": program})
    run_code_ms = (time.perf_counter() - started) * 1000
    context += len(content_text(result).encode())
    answer = _read(result)
    wall_ms = (time.perf_counter() - started) * 1000
    all_turns += context  # turn 2 reads the result and writes the answer
    context += _json_bytes(answer)
    nested = len(result.meta.get("dispatch_log", ()))
    return Episode(task=task.name, mode="code", answer=answer,
                   correct=answer == task.expected(run), model_turns=2,
                   context_bytes=context, input_bytes_all_turns=all_turns,
                   model_tool_calls=1, tool_calls_executed=nested,
                   wall_ms=wall_ms, run_code_ms=run_code_ms)
