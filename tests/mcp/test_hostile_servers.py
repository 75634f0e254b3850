"""Mounting a hostile server (tests/mcp/hostile_server.py, the official SDK's low-level
server with raw bytes where the SDK cannot misbehave enough), over stdio on this machine:
DESIGN section 9, "Hostile peers". Every probe ends as a clear error or a lenient answer,
the next call on the same mount still works, and nothing waits without a bound.

A probe that only calls a tool reuses the module's mount with its limits (``shared``): the
server is the same process from one probe to the next, which each leaves answering. A probe
of the listing or of mounting itself starts a server of its own."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import ptc
from ptc import mcp as ptc_mcp
from tests._typing import data

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).with_name("hostile_server.py")
MIB = 1 << 20
MISBEHAVING = [
    *("ok", "bad_utf8", "blocks", "text", "image", "never", "nested_reply", "result_first"),
    *("structured", "meta"),
]
LIMITS = "(limits: mount(max_reply_bytes=, max_reply_blocks=, max_reply_values=))"


def hostile(*listing: str, names: list[str] | None = None) -> ptc_mcp.StdioServer:
    args = [str(HOSTILE)]
    for kind in listing:
        args += ["--list", kind]
    if names is not None:
        args += ["--names-json", json.dumps(names)]
    return ptc_mcp.stdio(sys.executable, *args)


def error_of(result: ptc.ToolResult) -> tuple[str, str]:
    assert result.error is not None, result.value
    return result.error.code, result.error.message


@pytest.fixture
async def agent() -> AsyncIterator[ptc.Scope]:
    async with ptc.ToolRuntime() as runtime:
        yield runtime.scope("agent")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # one event loop for the module: the shared mounts live across tests


Shared = Callable[..., Awaitable[tuple[ptc.Scope, ptc_mcp.Mount]]]


@pytest.fixture(scope="module")
async def shared() -> AsyncIterator[Shared]:
    """``await shared(**options)``: the scope where ``hostile()`` is mounted with these
    ``mount()`` options, and its mount, made on first use (one server per set of options)."""
    async with ptc.ToolRuntime() as runtime:
        mounts: dict[str, tuple[ptc.Scope, ptc_mcp.Mount]] = {}

        async def get(**options: Any) -> tuple[ptc.Scope, ptc_mcp.Mount]:
            key = json.dumps(options, sort_keys=True)
            if key not in mounts:
                scope = runtime.scope(f"shared-{len(mounts)}")
                mounts[key] = scope, await ptc_mcp.mount(scope, hostile(), **options)
            return mounts[key]

        yield get


async def still_answers(scope: ptc.Scope) -> None:
    with anyio.fail_after(30):
        result = await scope.call("ok", {"text": "still there?"})
    assert result.value == "still there?", result.error


@contextmanager
def peak_memory_growth() -> Iterator[list[int]]:
    """The growth of this process's peak resident memory (KiB) over the block: the peak is
    reset first (``/proc/self/clear_refs``), then read back (``VmHWM``)."""

    def read(field: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} in /proc/self/status")

    Path("/proc/self/clear_refs").write_text("5")
    before = read("VmRSS")
    growth: list[int] = []
    yield growth
    growth.append(read("VmHWM") - before)


async def test_invalid_utf8_is_replaced_and_the_mount_keeps_working(shared: Shared) -> None:
    agent, mounted = await shared()
    with anyio.fail_after(30):
        # A lone \xff line first (garbage, logged), then a reply with \xff in its text.
        result = await agent.call("bad_utf8", {})
    assert result.value == "after \ufffd", result.error
    assert mounted.connected
    await still_answers(agent)


TOO_MANY = "holds more JSON values than max_reply_values=25,000"


@pytest.mark.parametrize(
    ("tool", "arguments", "limits", "message"),
    [
        ("text", {"mib": 2}, {"max_reply_bytes": MIB}, "over max_reply_bytes=1,048,576"),
        ("image", {"mib": 2}, {"max_reply_bytes": MIB}, "over max_reply_bytes=1,048,576"),
        # The id after the result (some SDKs' key order): found at the end of the line.
        ("result_first", {"n": 10_000}, {"max_reply_bytes": MIB // 4}, "over max_reply_bytes"),
        ("blocks", {"n": 6}, {"max_reply_blocks": 5}, "6 content blocks, over max_reply_blocks=5"),
        # The probes at their measured sizes, under the default limits.
        ("blocks", {"n": 1001}, {}, "1,001 content blocks, over max_reply_blocks=1,000"),
        *[
            pytest.param(tool, size, {}, "over max_reply_bytes=4,194,304", marks=pytest.mark.slow)
            for tool, size in [
                ("text", {"mib": 100}),
                ("image", {"mib": 50}),
            ]
        ],
        # Within the byte limit, refused as they are read: before any parse, and before
        # max_reply_blocks could count the blocks.
        ("blocks", {"n": 150_000}, {}, TOO_MANY),
        pytest.param("blocks", {"n": 1_000_000}, {}, TOO_MANY, marks=pytest.mark.slow),
        ("structured", {"n": 1_000_000}, {}, TOO_MANY),
        ("structured", {"n": 30_000, "item": "[]"}, {}, TOO_MANY),
        ("structured", {"n": 30_000, "item": '{"k":[0,{}]}'}, {}, TOO_MANY),
        ("meta", {"n": 30_000}, {}, TOO_MANY),
        # The id after the result: the line is kept whole, to the listing's bounds, to
        # find whose it is; then refused in that call's name.
        ("result_first", {"n": 10_000}, {}, "holds 30,005 JSON values, over max_reply_values"),
        # {"jsonrpc", "id", "result": {"content": [], "structuredContent": {"v": [994]}}}:
        # 1,001 values.
        ("structured", {"n": 994}, {"max_reply_values": 1000}, "than max_reply_values=1,000"),
    ],
)
async def test_a_reply_over_a_limit_fails_clearly_and_the_next_call_works(
    shared: Shared, tool: str, arguments: dict[str, Any], limits: dict[str, Any], message: str
) -> None:
    agent, _ = await shared(**limits)
    with peak_memory_growth() as growth, anyio.fail_after(60):
        result = await agent.call(tool, arguments)
    code, text = error_of(result)
    assert code == "TOOL_ERROR" and message in text, text
    assert text.endswith(LIMITS)
    await still_answers(agent)
    # Nothing near the reply's size was held: at most the limit, a few times over.
    assert growth[0] < 64 * 1024, f"peak memory grew by {growth[0]} KiB"


@pytest.mark.parametrize(
    ("tool", "arguments", "limits"),
    [
        ("structured", {"n": 993}, {"max_reply_values": 1000}),  # 1,000 values: the limit
        ("structured", {"n": 24_000}, {}),
        ("meta", {"n": 24_000}, {}),
        ("blocks", {"n": 1000}, {}),  # 3,005 values
        ("text", {"mib": 3.9}, {}),  # 4 MiB of text is a handful of values
        ("text", {"mib": 3.9, "fill": '7,\\"a, b\\",[x],{y}\\n'}, {}),  # ... even CSV-like
    ],
)
async def test_a_reply_within_the_values_limit_passes_whole(
    shared: Shared, tool: str, arguments: dict[str, Any], limits: dict[str, Any]
) -> None:
    agent, _ = await shared(**limits)
    with anyio.fail_after(60):
        result = await agent.call(tool, arguments)
    assert result.error is None, result.error
    if tool == "structured":
        assert result.value == {"v": [0] * arguments["n"]}
    elif tool == "text":
        assert isinstance(result.value, str) and len(result.value) > 3 * MIB
    else:
        assert result.value == ("x\n" * (arguments["n"] - 1) + "x" if tool == "blocks" else "x")


@pytest.mark.parametrize(("max_tools", "limit"), [(1000, 100_000), (2000, 200_000)])
async def test_a_tool_list_of_too_many_values_is_a_mount_error(
    agent: ptc.Scope, max_tools: int, limit: int
) -> None:
    # Zeros in one schema (2 bytes each, within a schema's byte limit): 100 values per tool.
    with anyio.fail_after(60), pytest.raises(
        ptc_mcp.MountError,
        match=re.escape(
            f"reply to tools/list holds more JSON values than {limit:,}"
            f" (100 per tool of max_tools={max_tools:,})"
        ),
    ):
        await ptc_mcp.mount(agent, hostile(f"values={limit}"), max_tools=max_tools)
    assert agent.view().visible == {}
    mounted = await ptc_mcp.mount(agent, hostile(f"values={limit - 100}"), max_tools=max_tools)
    assert "many_values" in mounted.names


@pytest.mark.parametrize(
    "knob", ["max_reply_bytes", "max_reply_blocks", "max_reply_values", "max_tools"]
)
@pytest.mark.parametrize(
    ("value", "error"),
    [
        (True, ptc.UsageError),
        (1000.0, ptc.UsageError),
        ("1000", ptc.UsageError),
        (0, ptc.ConfigurationError),
        (-1, ptc.ConfigurationError),
    ],
)
async def test_the_limits_are_checked_before_any_server_starts(
    agent: ptc.Scope, knob: str, value: object, error: type[Exception]
) -> None:
    options: dict[str, Any] = {knob: value}
    with pytest.raises(error, match=knob):
        await ptc_mcp.mount(agent, ptc_mcp.stdio("/nonexistent/server"), **options)


async def test_a_reply_nested_beyond_any_parser_fails_clearly(shared: Shared) -> None:
    agent, _ = await shared()
    for depth, message in [
        (250, "nested too deeply"),  # deeper than the SDK parses
        (20_000, "nested too deeply"),  # deeper than Python parses
        (200_000, TOO_MANY),  # each level is a value: refused before any parse
    ]:
        with anyio.fail_after(30):
            deep = await agent.call("nested_reply", {"depth": depth})
        code, text = error_of(deep)
        assert code == "TOOL_ERROR" and message in text, text
        await still_answers(agent)


async def test_calls_time_out_by_default(shared: Shared) -> None:
    agent, mounted = await shared()
    assert {agent.view().visible[n].timeout_seconds for n in mounted.names} == {60}
    patient, unbounded = await shared(timeout_seconds=None)  # a sibling scope
    assert {patient.view().visible[n].timeout_seconds for n in unbounded.names} == {None}


@pytest.mark.parametrize("policy", ["raise", "skip", "lenient"])
async def test_a_deeply_nested_schema_is_reported_as_such(
    agent: ptc.Scope, policy: ptc_mcp.BadSchemaPolicy
) -> None:
    server = hostile("nested=150")  # too deep for the SDK's own parser
    with anyio.fail_after(30):
        if policy == "skip":
            mounted = await ptc_mcp.mount(agent, server, on_bad_schema=policy)
            assert "nested deeper than 200 levels" in mounted.skipped["deep"]
            assert mounted.names == tuple(MISBEHAVING)
            return
        with pytest.raises(ptc.SchemaError, match=r"'deep'.*nested deeper than 200 levels"):
            await ptc_mcp.mount(agent, server, on_bad_schema=policy)


@pytest.mark.parametrize("policy", ["raise", "lenient"])
async def test_an_oversized_schema_is_refused_before_any_rewrite(
    agent: ptc.Scope, policy: ptc_mcp.BadSchemaPolicy
) -> None:
    with anyio.fail_after(60), pytest.raises(ptc.SchemaError, match=r"'huge'.*bytes as JSON"):
        # Over 1 MiB, within the listing's 100,000 values (2 per property: 78,600).
        await ptc_mcp.mount(agent, hostile("schema_mib=1.5"), on_bad_schema=policy)
    assert agent.view().visible == {}


@pytest.mark.parametrize(("listed", "options"), [(1000, {}), (5, {"max_tools": 10})])
async def test_a_tool_list_over_max_tools_is_a_mount_error(
    agent: ptc.Scope, listed: int, options: dict[str, Any]
) -> None:
    limit = options.get("max_tools", 1000)
    with pytest.raises(ptc_mcp.MountError, match=f"lists [0-9,]+ tools, over max_tools={limit:,}"):
        await ptc_mcp.mount(agent, hostile(f"tools={listed}"), **options)
    assert agent.view().visible == {}
    own = len(MISBEHAVING)
    mounted = await ptc_mcp.mount(agent, hostile(f"tools={listed}"), max_tools=listed + own)
    assert len(mounted.names) == listed + own


BAD_NAMES = ["evil\n", "evil\r\n", "evil\x00", "e" * 129, "has space"]


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_names_outside_the_pattern_are_refused(agent: ptc.Scope, name: str) -> None:
    with pytest.raises(ptc.DefinitionError, match="must match"):
        await ptc_mcp.mount(agent, hostile(names=[name]))


async def test_names_outside_the_pattern_are_skipped_on_request(agent: ptc.Scope) -> None:
    mounted = await ptc_mcp.mount(agent, hostile(names=BAD_NAMES), on_bad_schema="skip")
    for name in BAD_NAMES:
        assert "must match" in mounted.skipped[name] and name not in mounted.names
    assert mounted.names == tuple(MISBEHAVING)


async def test_descriptions_ending_in_quotes_leave_a_stub_that_compiles(agent: ptc.Scope) -> None:
    await ptc_mcp.mount(agent, hostile("description"))
    agent.present_as("code")
    await agent.prepare()
    compile(agent.sdk(), "<stub>", "exec")
    ran = await agent.run_code("return tools.ok(text='after the quotes')")
    assert ran.error is None and data(ran.value)["result"] == "after the quotes"
