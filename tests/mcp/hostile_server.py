"""A hostile MCP server built with the official SDK's low-level ``Server``, for the tests
and the benchmark of ``ptc.mcp`` under hostile peers (DESIGN section 9, "Hostile peers").

Run: ``python hostile_server.py [--list KIND[=N]] [--names-json JSON]`` (stdio). The tool
list is one tool ``ok`` plus what ``--list`` asks for; calling a tool misbehaves as its name
says. Replies too large or too broken for the SDK to write are written as raw bytes on the
wire the SDK uses, with the request's id (the handler then waits to be cancelled).

Tools (arguments in brackets):
- ``ok(text)``: answers ``text`` (a well-behaved call, to show the connection still works).
- ``bad_utf8()``: writes the byte ``\\xff`` (and a newline) on stdout, then answers
  ``"after"`` with an invalid UTF-8 byte inside the reply's text as well.
- ``blocks(n)``: a reply of ``n`` text blocks (raw).
- ``text(mib[, fill])``: a reply of one text block of ``mib`` MiB (raw, no newline until the
  end) made of ``fill`` repeated (``"y"`` unless given; ``"a,b,[c]\\n"`` makes it CSV-like).
- ``image(mib)``: a reply of one image block of ``mib`` MiB of base64 (raw).
- ``never()``: never answers.
- ``nested_reply(depth)``: a reply nested ``depth`` levels deep (raw).
- ``result_first(n)``: like ``blocks``, but the id written after the result (key order of
  some SDKs).
- ``structured(n[, item])``: a reply whose ``structuredContent`` is ``{"v": [item, ...]}``,
  ``n`` times the JSON text ``item`` (``"0"`` unless given), no content blocks (raw). Listed
  with an output schema, so its value is the structured content.
- ``meta(n)``: one text block whose ``_meta`` holds an array of ``n`` zeros (raw).

Listing kinds: ``tools=N`` (N more tools), ``nested=D`` (a tool whose input schema nests D
levels), ``schema_mib=M`` (a tool with an M MiB input schema), ``values=N[:ITEM]`` (a tool
whose input schema holds ``N`` times the JSON value ``ITEM``, ``0`` unless given, in an
array), ``description`` (a tool whose description ends in triple quotes, with
backslashes), ``names-json`` (tools with these exact names, e.g. ``["evil\\n"]``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

OBJ: dict[str, Any] = {"type": "object"}
_WIRE: list[int] = []  # the fd the SDK writes the protocol to (set in main)


def nested_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def tool_list(kinds: list[str], names: list[str]) -> list[types.Tool]:
    tools = [
        types.Tool(
            name="ok",
            description="Answer the text.",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        )
    ]
    tools += [
        types.Tool(name=name, description=f"Misbehave: {name}.", input_schema=OBJ)
        for name in ("bad_utf8", "blocks", "text", "image", "never", "nested_reply", "result_first")
    ]
    tools += [
        types.Tool(
            name="structured",
            description="Misbehave: structured.",
            input_schema=OBJ,
            output_schema=OBJ,
        ),
        types.Tool(name="meta", description="Misbehave: meta.", input_schema=OBJ),
    ]
    for kind in kinds:
        key, _, value = kind.partition("=")
        if key == "tools":
            tools += [
                types.Tool(name=f"t{i}", description=f"Tool {i}.", input_schema=OBJ)
                for i in range(int(value))
            ]
        elif key == "nested":
            tools.append(
                types.Tool(name="deep", description="Deep.", input_schema=nested_schema(int(value)))
            )
        elif key == "schema_mib":
            # Many properties of a non-standard type: "lenient" would have work to do.
            count = int(float(value) * (1 << 20)) // 40
            properties = {f"p{i:09d}": {"type": "dict"} for i in range(count)}
            tools.append(
                types.Tool(
                    name="huge",
                    description="Huge.",
                    input_schema={"type": "object", "properties": properties},
                )
            )
        elif key == "values":
            # A schema of N tiny values, within a schema's byte limit: {"x-values": [0, ...]}.
            times, _, item = value.partition(":")
            items = [json.loads(item or "0")] * int(times)
            tools.append(
                types.Tool(
                    name="many_values",
                    description="Many values.",
                    input_schema={"type": "object", "x-values": items},
                )
            )
        elif key == "description":
            tools.append(
                types.Tool(
                    name="quotes",
                    description='Ends in a backslash, then quotes: C:\\temp\\ """',
                    input_schema=OBJ,
                )
            )
            tools.append(
                types.Tool(
                    name="quoted_param",
                    description='"""',
                    input_schema={
                        "type": "object",
                        "properties": {"q": {"type": "string", "description": 'say """hi"""\\'}},
                    },
                )
            )
    tools += [types.Tool(name=name, description="A name.", input_schema=OBJ) for name in names]
    return tools


def write_raw(data: bytes) -> None:
    """Bytes straight onto the protocol's wire (the SDK writes whole lines, one at a time)."""
    view = memoryview(data)
    while view:
        written = os.write(_WIRE[0], view)
        view = view[written:]


def raw_result(request_id: Any, result_json: str, *, id_last: bool = False) -> bytes:
    ident = json.dumps(request_id)
    if id_last:
        return f'{{"result":{result_json},"jsonrpc":"2.0","id":{ident}}}\n'.encode()
    return f'{{"jsonrpc":"2.0","id":{ident},"result":{result_json}}}\n'.encode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", action="append", default=[])
    parser.add_argument("--names-json", default="[]")
    args = parser.parse_args()
    names: list[str] = json.loads(args.names_json)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listed = types.ListToolsResult(tools=tool_list(args.list, names))
        depth = max((int(k.split("=")[1]) for k in args.list if k.startswith("nested=")), default=0)
        if depth * 2 + 8 < 200:
            return listed
        # Deeper than the SDK itself can write: the listing goes out as raw bytes.
        tools = [
            t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed.tools[:-1]
        ]
        tools.append({"name": "deep", "description": "Deep.", "inputSchema": nested_schema(depth)})
        result = json.dumps({"tools": tools})
        write_raw(raw_result(ctx.request_id, result))
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = params.arguments or {}
        name = params.name
        rid = ctx.request_id
        if name == "ok":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(arguments.get("text", "ok")))]
            )
        if name == "bad_utf8":
            write_raw(b"\xff\n")
            ident = json.dumps(rid).encode()
            text = b'{"content":[{"type":"text","text":"after \xff"}]}'
            write_raw(b'{"jsonrpc":"2.0","id":' + ident + b',"result":' + text + b"}\n")
        elif name in ("blocks", "result_first"):
            block = '{"type":"text","text":"x"}'
            result = '{"content":[' + ",".join([block] * int(arguments["n"])) + "]}"
            write_raw(raw_result(rid, result, id_last=name == "result_first"))
        elif name == "text":
            fill = str(arguments.get("fill", "y")).encode()
            # Whole repeats of fill only: an escape in it is never cut in two.
            size = int(float(arguments["mib"]) * (1 << 20)) // len(fill) * len(fill)
            ident = json.dumps(rid).encode()
            write_raw(
                b'{"jsonrpc":"2.0","id":' + ident + b',"result":{"content":[{"type":"text","text":"'
            )
            chunk = fill * ((1 << 20) // len(fill))
            for start in range(0, size, len(chunk)):
                write_raw(chunk[: size - start])
            write_raw(b'"}]}}\n')
        elif name == "image":
            size = int(float(arguments["mib"]) * (1 << 20)) // 4 * 4
            data = "A" * size
            block = json.dumps({"type": "image", "data": data, "mimeType": "image/png"})
            write_raw(raw_result(rid, '{"content":[' + block + "]}"))
        elif name == "structured":
            items = ",".join([str(arguments.get("item", "0"))] * int(arguments["n"]))
            write_raw(raw_result(rid, '{"content":[],"structuredContent":{"v":[' + items + "]}}"))
        elif name == "meta":
            zeros = ",".join(["0"] * int(arguments["n"]))
            block = '{"type":"text","text":"x","_meta":{"v":[' + zeros + "]}}"
            write_raw(raw_result(rid, '{"content":[' + block + "]}"))
        elif name == "nested_reply":
            depth = int(arguments["depth"])
            value = "[" * depth + "]" * depth
            write_raw(raw_result(rid, '{"content":[],"structuredContent":{"v":' + value + "}}"))
        await anyio.sleep_forever()  # "never", and every raw reply: nothing more to say
        raise AssertionError("unreachable")

    server = Server("hostile", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)

    # The protocol's wire, shared by the SDK's writer and write_raw (the SDK writes one
    # whole line at a time; a raw reply is written while the SDK has nothing to say).
    _WIRE.append(sys.stdout.fileno())
    wire = open(sys.stdout.fileno(), "w", encoding="utf-8", closefd=False)  # noqa: SIM115

    async def run() -> None:
        stdout = anyio.wrap_file(wire)
        stdin = anyio.wrap_file(sys.stdin)
        async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
