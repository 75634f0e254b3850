"""The optional OpenAI-compatible client and model loop, against a local fake server only."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from benchmarks._model import ChatClient, ModelError, answer_mentions, run_model_episode
from ptc.examples import build_runtime

pytestmark = pytest.mark.anyio


@dataclass
class FakeChatServer:
    """Serves scripted chat-completion replies in order and records every request."""

    replies: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


def _tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }
    return {
        "choices": [{"message": message}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3},
    }


def _answer(text: str) -> dict[str, Any]:
    return {
        "choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 2},
    }


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    state = FakeChatServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            status, reply = state.replies.pop(0) if state.replies else (500, {"error": "none"})
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_client_posts_model_messages_tools_and_key(server: FakeChatServer) -> None:
    server.replies.append((200, _answer("hello")))
    client = ChatClient(base_url=server.url, model="fake-1", api_key="sk-test")
    tools = [{"type": "function", "function": {"name": "x", "description": "", "parameters": {}}}]
    reply = client.complete([{"role": "user", "content": "hi"}], tools)
    assert reply.message["content"] == "hello"
    assert reply.usage == {"prompt_tokens": 20, "completion_tokens": 2}
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["body"] == {
        "model": "fake-1",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": tools,
    }
    assert reply.request_bytes == len(json.dumps(request["body"]).encode())


def test_client_without_key_sends_no_authorization(server: FakeChatServer) -> None:
    server.replies.append((200, _answer("ok")))
    ChatClient(base_url=server.url + "/", model="m").complete([], [])
    assert "Authorization" not in server.requests[0]["headers"]
    assert "tools" not in server.requests[0]["body"]


@pytest.mark.parametrize(
    ("status", "reply", "message"),
    [(401, {"error": "bad key"}, "HTTP 401"), (200, {"nothing": True}, "not a chat completion")],
)
def test_client_errors_name_the_failure(
    server: FakeChatServer, status: int, reply: dict[str, Any], message: str
) -> None:
    server.replies.append((status, reply))
    with pytest.raises(ModelError, match=message):
        ChatClient(base_url=server.url, model="m").complete([], [])


def test_unreachable_endpoint_is_a_model_error() -> None:
    client = ChatClient(base_url="http://127.0.0.1:9/v1", model="m", timeout_seconds=2)
    with pytest.raises(ModelError, match="model endpoint failed"):
        client.complete([], [])


async def test_native_loop_runs_the_models_tool_calls_through_the_scope(
    server: FakeChatServer,
) -> None:
    server.replies += [
        (200, _tool_call("get_exchange_rate", {"currency": "EUR"})),
        (200, _answer("1 EUR = 1.0842 USD")),
    ]
    async with build_runtime() as runtime:
        scope = runtime.scope("m")
        scope.present_as("native")
        episode = await run_model_episode(
            ChatClient(base_url=server.url, model="m"),
            scope,
            "EUR?",
            task="single_rate",
            mode="native",
        )
        sent_tools = scope.model_tools(format="openai")
    assert episode.model_turns == 2 and episode.tool_calls == 1
    assert (episode.prompt_tokens, episode.completion_tokens) == (31, 5)
    assert answer_mentions(1.0842, episode.answer_text)
    first, second = (r["body"] for r in server.requests)
    assert first["tools"] == json.loads(json.dumps(sent_tools))
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert json.loads(tool_message["content"]) == {"currency": "EUR", "usd_per_unit": 1.0842}


async def test_code_loop_sends_only_run_code_and_runs_the_program(
    server: FakeChatServer,
) -> None:
    program = 'return tools.get_exchange_rate(currency="EUR")["usd_per_unit"]'
    server.replies += [(200, _tool_call("run_code", {"code": program})), (200, _answer("1.0842"))]
    async with build_runtime() as runtime:
        scope = runtime.scope("m")
        scope.present_as("code")
        episode = await run_model_episode(
            ChatClient(base_url=server.url, model="m"),
            scope,
            "EUR?",
            task="single_rate",
            mode="code",
        )
    first, second = (r["body"] for r in server.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["run_code"]
    assert second["messages"][-1]["content"].strip() == "1.0842"
    assert episode.tool_calls == 1 and answer_mentions(1.0842, episode.answer_text)


def test_answer_mentions_checks_every_scalar() -> None:
    expected = {"warmest": "Bogota", "rain": ["Dublin", "Oslo"]}
    assert answer_mentions(expected, "warmest: Bogota; rain in Dublin and Oslo")
    assert not answer_mentions(expected, "warmest: Bogota; rain in Dublin")
