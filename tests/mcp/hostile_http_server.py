"""A hostile MCP server over streamable HTTP, for the tests of ``ptc.mcp`` under hostile
peers (DESIGN section 9, "Hostile peers"): raw JSON-RPC on Starlette, served by uvicorn on
127.0.0.1 (the SDK's own server could not misbehave enough).

Run: ``python hostile_http_server.py [--event-values N]`` prints
``http://127.0.0.1:PORT/mcp`` on its first line of stdout, then serves until it is
terminated. Without ``--event-values`` it gives no session id, so the client opens no
event stream of its own; with it, it gives one, and its event stream (a GET) sends one
log notification whose data is ``N`` zeros.

Tools (arguments in brackets):
- ``ok(text)``: answers ``text`` (a well-behaved call, to show the connection still works).
- ``structured(n)``: ``structuredContent`` ``{"v": [0, ...]}`` of ``n`` zeros, as one JSON
  body. Listed with an output schema, so its value is the structured content.
- ``streamed(n, notes)``: the same reply as the last event of an SSE body, after ``notes``
  small log notifications (one event each).
- ``compressed()``: answers ``"ok"`` in a gzip body (``Content-Encoding: gzip``), whatever
  the request accepted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import socket
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

OBJ: dict[str, Any] = {"type": "object"}
LOG: dict[str, Any] = {"level": "info", "data": "x"}  # a log notification's params
TOOLS = [
    {"name": "ok", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "structured", "inputSchema": OBJ, "outputSchema": OBJ},
    {"name": "streamed", "inputSchema": OBJ, "outputSchema": OBJ},
    {"name": "compressed", "inputSchema": OBJ},
]


def reply(request_id: Any, result_json: str) -> str:
    return f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{result_json}}}'


def zeros(n: int) -> str:
    return '{"content":[],"structuredContent":{"v":[' + ",".join(["0"] * n) + "]}}"


def text(value: str) -> str:
    return json.dumps({"content": [{"type": "text", "text": value}]})


def call(request_id: Any, name: str, arguments: dict[str, Any]) -> Response:
    if name == "structured":
        body = reply(request_id, zeros(int(arguments["n"])))
        return Response(body, media_type="application/json")
    if name == "streamed":
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": LOG})
        events = [note] * int(arguments["notes"]) + [reply(request_id, zeros(int(arguments["n"])))]
        stream = "".join(f"event: message\ndata: {event}\n\n" for event in events)
        return Response(stream, media_type="text/event-stream")
    if name == "compressed":
        packed = gzip.compress(reply(request_id, text("ok")).encode())
        return Response(packed, media_type="application/json", headers={"Content-Encoding": "gzip"})
    body = reply(request_id, text(str(arguments.get("text", "ok"))))
    return Response(body, media_type="application/json")


async def endpoint(request: Request) -> Response:
    event_values: int | None = request.app.state.event_values
    if request.method == "GET" and event_values is not None:
        log = {"level": "info", "data": [0] * event_values}
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
        return Response(f"event: message\ndata: {note}\n\n", media_type="text/event-stream")
    if request.method != "POST":
        return Response(status_code=405)
    message: dict[str, Any] = json.loads(await request.body())
    request_id, method = message.get("id"), message.get("method")
    if request_id is None:
        return Response(status_code=202)  # a notification
    params: dict[str, Any] = message.get("params") or {}
    result: dict[str, Any]
    if method == "initialize":
        result = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile-http", "version": "1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [{"description": f"Misbehave: {t['name']}.", **t} for t in TOOLS]}
    elif method == "tools/call":
        return call(request_id, params["name"], params.get("arguments") or {})
    else:
        result = {}
    session = {"mcp-session-id": "hostile"} if event_values is not None else None
    body = reply(request_id, json.dumps(result))
    return Response(body, media_type="application/json", headers=session)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--event-values", type=int)
    app = Starlette(routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])])
    app.state.event_values = parser.parse_args().event_values
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
