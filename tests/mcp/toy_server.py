"""An MCP server built with the official SDK's low-level ``Server``, for the tests of
``ptc.mcp``: text, images, ``isError``, ``outputSchema``, a paginated listing,
``list_changed``, a slow tool that reports its cancellation, and a schema ptc rejects.

Run: ``python toy_server.py --marker DIR [--bad-schema]`` (stdio). The slow tool writes
``DIR/slow`` (``started <pid>``, then ``cancelled`` when the client cancels it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

PAGE = 3
# A 1x1 red PNG.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAF"
    "BQIAX8jx0gAAAABJRU5ErkJggg=="
)
ADD_OUTPUT = {
    "type": "object",
    "properties": {"sum": {"type": "integer"}},
    "required": ["sum"],
}


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def tool_list(bad_schema: bool, grown: int) -> list[types.Tool]:
    tools = [
        types.Tool(
            name="echo",
            title="Echo",
            description="Say the text back.",
            input_schema=obj(text={"type": "string"}),
            annotations=types.ToolAnnotations(read_only_hint=True),
            _meta={"toy/kind": "text"},
        ),
        types.Tool(name="picture", description="A red dot.", input_schema=obj()),
        types.Tool(
            name="fail", description="Always fails.", input_schema=obj(reason={"type": "string"})
        ),
        types.Tool(
            name="add",
            description="Add two integers.",
            input_schema=obj(a={"type": "integer"}, b={"type": "integer"}),
            output_schema=ADD_OUTPUT,
            annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        ),
        types.Tool(
            name="bad_output",
            description="Breaks its own output schema.",
            input_schema=obj(),
            output_schema=ADD_OUTPUT,
        ),
        types.Tool(name="slow", description="Sleep.", input_schema=obj(seconds={"type": "number"})),
        types.Tool(name="grow", description="Add the tool `extra`.", input_schema=obj()),
    ]
    if grown:  # its description counts the calls of `grow`: each list_changed is told apart
        description = f"Appeared later (grown {grown}x)."
        tools.append(types.Tool(name="extra", description=description, input_schema=obj()))
    if bad_schema:
        tools.append(
            types.Tool(
                name="legacy",
                description="A schema from the wild.",
                input_schema={"type": "object", "properties": {"x": {"type": "dict"}}},
            )
        )
    return tools


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--marker", type=Path, required=True)
    parser.add_argument("--bad-schema", action="store_true")
    parser.add_argument("--hostile", action="store_true")
    args = parser.parse_args()
    state = {"grown": 0}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = tool_list(args.bad_schema, state["grown"])
        if args.hostile:
            # A second `echo`, and a name ptc cannot register.
            tools = [*tools, tools[0], types.Tool(name="has space", input_schema=obj())]
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + PAGE
        return types.ListToolsResult(
            tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = params.arguments or {}
        name = params.name
        if args.hostile and name in ("echo", "add"):
            import sys

            sys.stdout.write("this is not JSON-RPC\n")  # garbage on the protocol stream
            sys.stdout.flush()
            if name == "add":  # a result that is not a CallToolResult
                return {"content": "not a list", "isError": "maybe"}  # type: ignore[return-value]
        if name == "echo":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=arguments["text"])]
            )
        if name == "picture":
            return types.CallToolResult(
                content=[
                    types.TextContent(type="text", text="a red dot"),
                    types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                ]
            )
        if name == "fail":
            text = f"the toy refuses: {arguments['reason']}"
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        if name in ("add", "bad_output"):
            total = {"sum": arguments["a"] + arguments["b"]} if name == "add" else {"sum": "many"}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(total))],
                structured_content=total,
            )
        if name == "slow":
            marker = args.marker / "slow"
            import os

            marker.write_text(f"started {os.getpid()}")
            try:
                await anyio.sleep(arguments["seconds"])
            except anyio.get_cancelled_exc_class():
                marker.write_text("cancelled")
                raise
            return types.CallToolResult(content=[types.TextContent(type="text", text="slept")])
        if name == "grow":
            state["grown"] += 1
            await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=[types.TextContent(type="text", text="grown")])
        if name == "extra":
            return types.CallToolResult(content=[types.TextContent(type="text", text="extra!")])
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="no such tool")], is_error=True
        )

    server = Server("toy", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        async with stdio_server() as (read, write):
            await server.run(read, write, options)

    anyio.run(run)


if __name__ == "__main__":
    main()
