"""An optional real model: a minimal OpenAI-compatible Chat Completions client (``urllib``).

Never required: the suite's figures come from the scripted policies in ``_tasks``. With
``--model NAME --base-url URL`` the same tasks run with a real model in both modes: native
mode sends ``scope.model_tools(format="openai")``, code mode sends ``[run_code]``, and every
tool call the model makes goes through ``scope.call``. The API key is read from the
environment variable named by ``--api-key-env`` (default ``OPENAI_API_KEY``); an unset
variable sends no Authorization header (local servers).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from . import _stats
from ._episodes import runtime_kwargs

SYSTEM_PROMPT = (
    "You answer questions with the tools provided. When done, reply with the answer only, "
    "as compact JSON."
)


class ModelError(Exception):
    """The model endpoint failed or answered something that is not a chat completion."""


@dataclass(frozen=True, kw_only=True)
class ChatReply:
    message: dict[str, Any]
    usage: dict[str, Any]
    request_bytes: int


@dataclass(frozen=True, kw_only=True)
class ChatClient:
    """POST ``{base_url}/chat/completions``; one call per model turn."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout_seconds: float = 120.0
    extra_body: dict[str, Any] = field(default_factory=dict)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatReply:
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self.extra_body}
        if tools:
            body["tools"] = tools
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.base_url.rstrip("/") + "/chat/completions",
                                         data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise ModelError(f"HTTP {exc.code} from the model endpoint: {detail}") from exc
        except (urllib.error.URLError, TimeoutError, ValueError) as exc:
            raise ModelError(f"model endpoint failed: {exc}") from exc
        try:
            message = payload["choices"][0]["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"not a chat completion: {str(payload)[:300]}") from exc
        return ChatReply(message=message, usage=payload.get("usage") or {}, request_bytes=len(data))


@dataclass(frozen=True, kw_only=True)
class ModelEpisode:
    task: str
    mode: str
    answer_text: str
    model_turns: int
    request_bytes_all_turns: int
    tool_calls: int
    prompt_tokens: int
    completion_tokens: int
    wall_ms: float


def _content_text(result: Any) -> str:
    return "".join(str(b.get("text", "")) for b in result.content if b.get("type") == "text")


async def run_model_episode(client: ChatClient, scope: Any, prompt: str, *, task: str,
                            mode: str, max_turns: int = 12) -> ModelEpisode:
    """Let the model solve ``prompt`` with ``scope``'s tools; every call goes through the scope."""
    tools = scope.model_tools(format="openai")
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT},
                                      {"role": "user", "content": prompt}]
    turns = calls = sent = prompt_tokens = completion_tokens = 0
    started = time.perf_counter()
    answer = ""
    while turns < max_turns:
        reply = await anyio.to_thread.run_sync(client.complete, messages, tools)
        turns += 1
        sent += reply.request_bytes
        prompt_tokens += int(reply.usage.get("prompt_tokens", 0))
        completion_tokens += int(reply.usage.get("completion_tokens", 0))
        message = reply.message
        tool_calls = message.get("tool_calls") or []
        messages.append({"role": "assistant", "content": message.get("content"),
                         **({"tool_calls": tool_calls} if tool_calls else {})})
        if not tool_calls:
            answer = str(message.get("content") or "")
            break
        for tool_call in tool_calls:
            function = tool_call.get("function", {})
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {"__unparseable__": function.get("arguments")}
            result = await scope.call(str(function.get("name", "")), arguments)
            calls += 1
            messages.append({"role": "tool", "tool_call_id": tool_call.get("id", ""),
                             "content": _content_text(result)})
    return ModelEpisode(task=task, mode=mode, answer_text=answer, model_turns=turns,
                        request_bytes_all_turns=sent, tool_calls=calls,
                        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                        wall_ms=(time.perf_counter() - started) * 1000)


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


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("real model (optional)")
    group.add_argument("--model", default="", help="model name for an OpenAI-compatible API")
    group.add_argument("--base-url", default="https://api.openai.com/v1",
                       help="API base URL (…/v1)")
    group.add_argument("--api-key-env", default="OPENAI_API_KEY",
                       help="environment variable holding the API key")


def main_with_model(args: argparse.Namespace, tasks: Sequence[Any]) -> int:
    client = ChatClient(base_url=args.base_url, model=args.model,
                        api_key=os.environ.get(args.api_key_env) or None)
    episodes = anyio.run(lambda: _run_all(client, tasks, runtime_kwargs(args.relaxed_containment)))
    header = ["Task", "Mode", "Turns", "Request bytes, all turns", "Prompt tokens",
              "Completion tokens", "Tool calls", "Wall ms", "Answer mentions expected"]
    rows = [[e.task, e.mode, e.model_turns, e.request_bytes_all_turns, e.prompt_tokens,
             e.completion_tokens, e.tool_calls, e.wall_ms, ok] for e, ok in episodes]
    markdown = (f"# Native vs code mode with model `{args.model}`\n\n"
                + _stats.markdown_table(header, rows))
    payload = {"machine": _stats.machine_facts(), "model": args.model, "base_url": args.base_url,
               "episodes": [{**e.__dict__, "answer_mentions_expected": ok} for e, ok in episodes]}
    paths = _stats.write_results(f"native_vs_code_model_{_slug(args.model)}", payload, markdown,
                                 args.out)
    print(markdown)
    print(f"results: {paths[0]} and {paths[1]}")
    return 0


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)[:40]


async def _run_all(client: ChatClient, tasks: Sequence[Any],
                   kwargs: dict[str, Any]) -> list[tuple[ModelEpisode, bool]]:
    from ptc.examples import build_runtime

    out: list[tuple[ModelEpisode, bool]] = []
    for task in tasks:
        for mode in ("native", "code"):
            # A fresh runtime per episode: job counters and caches start from zero each time.
            async with build_runtime(**kwargs) as runtime:
                scope = runtime.scope(f"model-{mode}")
                scope.present_as(mode)
                _stats.progress(f"model {client.model}: {task.name} [{mode}]")
                episode = await run_model_episode(client, scope, task.prompt, task=task.name,
                                                  mode=mode)
                out.append((episode, answer_mentions(task.expected(0), episode.answer_text)))
    return out
