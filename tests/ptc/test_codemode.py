"""Code mode (docs/code-mode.md) on the in-process fake worker: modes, the reserved
``run_code``, nested dispatch through the full pipeline, scheduling inside a run, the
dispatch log, aborts, content rendering and failure messages.

Concurrency is proven with ``anyio.Event`` handshakes and recorded events, never timing;
``anyio.fail_after`` only turns a broken handshake into a failure instead of a hang.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import ptc
from tests._backends import anyio_backend  # noqa: F401 - both anyio backends
from tests._typing import data
from worker import CallReply, CallRequest, RunOutcome, RunRequest
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio

DEADLOCK_GUARD_SECONDS = 10


def make_runtime(**options: Any) -> ptc.ToolRuntime:
    options.setdefault("default_mode", "code")
    options.setdefault("backend", FakeBackend())
    options.setdefault("containment", ptc.Containment(require=frozenset()))
    return ptc.ToolRuntime(**options)


@pytest.fixture
async def rt() -> AsyncIterator[ptc.ToolRuntime]:
    async with make_runtime() as runtime:
        yield runtime


def add_tools(target: ptc.ToolRuntime | ptc.Scope) -> None:
    @target.tool(concurrency_safe=True)
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @target.tool
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()


def ok(result: ptc.ToolResult) -> Any:
    assert not result.is_error, result.error
    return data(result.value)["result"]


def text_of(result: ptc.ToolResult) -> str:
    assert len(result.content) == 1 and result.content[0]["type"] == "text"
    text: str = data(result.content)[0]["text"]
    return text


def error_code(result: ptc.ToolResult) -> str:
    assert result.error is not None, result.content
    return result.error.code


def record_executions(runtime: ptc.ToolRuntime) -> list[ptc.ToolExecution]:
    seen: list[ptc.ToolExecution] = []

    async def observe(ex: ptc.ToolExecution, nxt: Any) -> Any:
        seen.append(ex)
        return await nxt()

    runtime.on("tools/pre-execute", observe)
    return seen


# -- modes and tool lists --------------------------------------------------------------


async def test_the_three_modes_send_the_right_tool_lists() -> None:
    async with make_runtime(default_mode="native") as runtime:
        add_tools(runtime)
        for mode, expected in [
            ("native", ["add", "shout"]),
            ("code", ["run_code"]),
            ("both", ["add", "shout", "run_code"]),
        ]:
            scope = runtime.scope(mode)
            scope.present_as(mode)  # type: ignore[arg-type]
            for fmt in ("raw", "anthropic", "mcp"):
                assert [t["name"] for t in data(scope.model_tools(format=fmt))] == expected
            openai = data(scope.model_tools(format="openai"))
            assert [t["function"]["name"] for t in openai] == expected
        assert [t["name"] for t in data(runtime.root.model_tools())] == ["add", "shout"]


async def test_run_code_spec_shows_only_code_and_description_and_embeds_the_sdk(
    rt: ptc.ToolRuntime,
) -> None:
    add_tools(rt)
    (spec,) = data(rt.root.model_tools(format="raw"))
    assert set(spec) == {"name", "description", "input_schema"}
    assert spec["input_schema"]["required"] == ["code"]
    assert set(spec["input_schema"]["properties"]) == {"code", "description"}
    # The model's form of the stub: the tools' signatures and docstrings, no typing prelude.
    description = str(spec["description"])
    tools_part = rt.root.sdk().split("\nclass tools:\n", 1)[1]
    for line in tools_part.splitlines():
        if line.startswith("    def ") and "**" not in line and "def call(" not in line:
            assert line in description
    assert "from typing import" not in description and "_Tool" not in description


async def test_sdk_text_is_byte_stable_across_registration_order_and_runtimes() -> None:
    texts = []
    for reverse in (False, True):
        async with make_runtime() as runtime:

            @ptc.tool(concurrency_safe=True)
            def add(a: int, b: int) -> int:
                """Add two numbers."""
                return a + b

            @ptc.tool
            def shout(text: str) -> str:
                """Upper-case a text."""
                return text.upper()

            for definition in [shout, add] if reverse else [add, shout]:
                runtime.register(definition)
            first = runtime.root.sdk()
            assert runtime.root.sdk() == first
            texts.append((first, data(runtime.root.model_tools())[0]["description"]))
    assert texts[0] == texts[1]
    assert texts[0][0].index("def add") < texts[0][0].index("def shout")


async def test_sdk_is_regenerated_when_the_visible_tools_change(rt: ptc.ToolRuntime) -> None:
    add_tools(rt)
    before = rt.root.sdk()

    @rt.tool
    def later(x: int) -> int:
        """Registered after the first SDK."""
        return x

    after = rt.root.sdk()
    assert "def later" in after and "def later" not in before
    assert ok(await rt.root.run_code("return tools.later(x=5)")) == 5


# -- run_code is reserved --------------------------------------------------------------


async def test_run_code_cannot_be_registered_shadowed_restricted_or_filtered_away(
    rt: ptc.ToolRuntime,
) -> None:
    add_tools(rt)
    child = rt.scope("child")

    async def execute(arguments: Any, context: Any) -> Any:
        return 1

    forged = ptc.define_tool(
        name="run_code",
        description="forged",
        input_schema={"type": "object"},
        output=ptc.Output({}, lambda v: []),
        execute=execute,
    )
    with pytest.raises(ValueError, match="run_code"):
        rt.register(forged)  # registered on root
    with pytest.raises(ValueError, match="run_code"):
        child.register(forged)  # a scope's own tool would shadow it
    with pytest.raises(ValueError, match="run_code"):
        child.restrict(deny=["run_code"])
    with pytest.raises(ValueError, match="run_code"):
        child.restrict(allow=["add", "run_code"])
    child.restrict(allow=[])  # hides every inherited tool ...
    assert list(child.view().visible) == ["run_code"]  # ... but never run_code
    grandchild = child.scope("grandchild")
    grandchild.restrict(deny=["add"])
    assert list(grandchild.view().visible) == ["run_code"]
    assert "run_code" not in rt.root.view().restrictable_names


async def test_run_code_is_not_an_sdk_binding(rt: ptc.ToolRuntime) -> None:
    add_tools(rt)
    assert "def run_code" not in rt.root.sdk()
    result = await rt.root.run_code("return tools.run_code(code='return 1')")
    assert error_code(result) == "CODE_RUN_FAILED"
    assert "(preflight)" in result.error.message  # type: ignore[union-attr]
    assert "tools.add" in result.error.message  # type: ignore[union-attr]


class ForgingBackend(FakeBackend):
    """A worker that bypasses the SDK and asks the host for ``run_code`` directly."""

    def __init__(self) -> None:
        super().__init__()
        self.replies: list[CallReply] = []

    async def run(self, request: RunRequest, **kwargs: Any) -> RunOutcome:
        on_calls = kwargs["on_calls"]
        forged = CallRequest(id=1, tool="run_code", arguments={"code": "return 1"})
        self.replies.extend(await on_calls([forged]))
        return await super().run(request, **kwargs)


async def test_a_forged_run_code_call_through_the_transport_is_unknown_tool() -> None:
    backend = ForgingBackend()
    async with make_runtime(backend=backend) as runtime:
        add_tools(runtime)
        seen = record_executions(runtime)
        result = await runtime.root.run_code("return tools.add(a=1, b=1)")
    assert ok(result) == 2
    (reply,) = backend.replies
    assert not reply.ok and reply.code == "UNKNOWN_TOOL"
    assert [ex.name for ex in seen] == ["run_code", "add"]  # the forged call ran no policy
    log = data(result.meta)["dispatch_log"]
    assert [(e["name"], e["error_code"]) for e in log] == [
        ("run_code", "UNKNOWN_TOOL"),
        ("add", None),
    ]


async def test_a_forged_run_code_call_reaches_the_program_as_tool_call_error(
    rt: ptc.ToolRuntime,
) -> None:
    add_tools(rt)
    # In the python profile a hostile program can dig the transport out of a binding's
    # globals; the host must still refuse run_code.
    code = (
        "t = tools.add._fn.__globals__['__transport__']\n"
        "answers = t.call_batch([('run_code', {'code': 'return 1'}), ('add', {'a': 1, 'b': 2})])\n"
        "return [[ok, list(v) if isinstance(v, tuple) else v] for ok, v in answers]"
    )
    result = await rt.root.run_code(code)
    value = ok(result)
    assert value[1] == [True, 3]
    ok_flag, (codename, message) = value[0]
    assert ok_flag is False and codename == "UNKNOWN_TOOL" and "run_code" in message


# -- mode collapse and per-scope modes -------------------------------------------------


async def test_a_direct_native_call_in_code_mode_is_unknown_tool(rt: ptc.ToolRuntime) -> None:
    add_tools(rt)
    result = await rt.root.call("add", {"a": 1, "b": 2})
    assert error_code(result) == "UNKNOWN_TOOL"
    assert "run_code" in result.error.message  # type: ignore[union-attr]
    signal = ptc.CancelSignal()
    signal.cancel()
    aborted = await rt.root.call("add", {"a": 1, "b": 2}, signal=signal)
    assert error_code(aborted) == "ABORTED_BEFORE_DISPATCH"  # as the original pins it


async def test_per_scope_modes_code_scope_native_sibling_and_inheriting_child() -> None:
    async with make_runtime(default_mode="native") as runtime:
        add_tools(runtime)
        coder = runtime.scope("coder")
        coder.present_as("code")
        sibling = runtime.scope("sibling")
        sibling.present_as("native")
        child = coder.scope("child")
        assert [t["name"] for t in data(coder.model_tools())] == ["run_code"]
        assert [t["name"] for t in data(child.model_tools())] == ["run_code"]
        assert [t["name"] for t in data(sibling.model_tools())] == ["add", "shout"]
        assert "run_code" not in runtime.root.view().visible
        assert ok(await child.run_code("return tools.add(a=2, b=3)")) == 5
        assert (await sibling.call("add", {"a": 2, "b": 3})).value == 5
        assert error_code(await child.call("add", {"a": 2, "b": 3})) == "UNKNOWN_TOOL"
        assert error_code(await sibling.call("run_code", {"code": "return 1"})) == "UNKNOWN_TOOL"
        with pytest.raises(ValueError, match="already"):
            coder.present_as("native")


async def test_a_scopes_sdk_lists_only_its_visible_tools() -> None:
    async with make_runtime(default_mode="native") as runtime:
        add_tools(runtime)
        narrow = runtime.scope("narrow")
        narrow.restrict(deny=["shout"])
        narrow.present_as("code")
        assert "def add" in narrow.sdk() and "def shout" not in narrow.sdk()
        result = await narrow.run_code("return tools.shout(text='x')")
        assert "(preflight)" in result.error.message  # type: ignore[union-attr]


# -- nested dispatch -------------------------------------------------------------------


async def test_nested_calls_carry_parent_token_call_ids_and_root_call_id(
    rt: ptc.ToolRuntime,
) -> None:
    add_tools(rt)
    seen = record_executions(rt)
    results: list[ptc.ToolResult] = []
    rt.on("tools/result", results.append)
    result = await rt.root.run_code(
        "a = tools.add(a=1, b=1)\nb = tools.add.map([{'a': 2, 'b': 2}, {'a': 3, 'b': 3}])\n"
        "return [a] + b",
        call_id="outer",
    )
    assert ok(result) == [2, 4, 6]
    outer, *nested = seen
    assert outer.name == "run_code" and outer.parent is None and outer.call_id == "outer"
    assert [ex.call_id for ex in nested] == ["outer:ptc:1", "outer:ptc:2", "outer:ptc:3"]
    for ex in nested:
        assert ex.parent is outer.token
        assert ex.root_call_id == "outer"
        assert ex.scope is rt.root
        assert ex.token is not outer.token
    assert len({id(ex.token) for ex in nested}) == 3
    # tools/result fires for every nested call and then for run_code itself (the two
    # calls of the map batch run in parallel, sync bodies on threads: either may end first).
    ids = [r.call_id for r in results]
    assert ids[0] == "outer:ptc:1" and sorted(ids[1:3]) == ["outer:ptc:2", "outer:ptc:3"]
    assert ids[3:] == ["outer"]


async def test_only_the_curated_value_reaches_the_program(rt: ptc.ToolRuntime) -> None:
    add_tools(rt)

    async def curate(payload: ptc.PostExecute, nxt: Any) -> Any:
        if payload.execution.name == "add":
            return ptc.Accept(value=data(payload.result.value) * 100)
        return await nxt()

    rt.on("tools/post-execute", curate)
    result = await rt.root.run_code("return tools.add(a=1, b=2)")
    assert ok(result) == 300
    (entry,) = data(result.meta)["dispatch_log"]
    assert entry["content"] == [{"type": "text", "text": "300"}]


async def test_a_blocked_result_reaches_the_program_as_tool_call_error(
    rt: ptc.ToolRuntime,
) -> None:
    add_tools(rt)

    async def block(payload: ptc.PostExecute, nxt: Any) -> Any:
        return ptc.Block("not for you") if payload.execution.name == "add" else await nxt()

    rt.on("tools/post-execute", block)
    code = (
        "try:\n    tools.add(a=1, b=2)\nexcept ToolCallError as e:\n"
        "    return [e.tool, e.code, e.message]"
    )
    assert ok(await rt.root.run_code(code)) == ["add", "BLOCKED", "not for you"]


CATCH = (
    "try:\n    tools.{call}\nexcept ToolCallError as e:\n"
    "    return [e.tool, e.code, e.message]\nreturn 'no error'"
)


async def test_tool_errors_denials_and_throwing_listeners_reach_the_program(
    rt: ptc.ToolRuntime,
) -> None:
    @rt.tool
    def broken() -> int:
        """Always fails."""
        raise RuntimeError("disk on fire")

    add_tools(rt)

    async def policy(ex: ptc.ToolExecution, nxt: Any) -> Any:
        if ex.name == "shout" and ex.arguments["text"] == "deny":
            return ptc.Deny("shouting is denied")
        if ex.name == "shout" and ex.arguments["text"] == "throw":
            raise RuntimeError("listener bug")
        return await nxt()

    rt.on("tools/pre-execute", policy)
    rt.root.guard(lambda ex: "no sevens" if ex.arguments.get("a") == 7 else None)

    async def run(call: str) -> list[str]:
        value = ok(await rt.root.run_code(CATCH.format(call=call)))
        assert isinstance(value, list), value
        return value

    tool, codename, message = await run("broken()")
    assert (tool, codename) == ("broken", "TOOL_ERROR") and "disk on fire" in message
    assert await run("shout(text='deny')") == ["shout", "DENIED", "shouting is denied"]
    tool, codename, message = await run("shout(text='throw')")
    assert (tool, codename) == ("shout", "DENIED") and "listener bug" in message
    assert await run("add(a=7, b=1)") == ["add", "DENIED", "no sevens"]
    tool, codename, message = await run("add(a='x', b=1)")
    assert (tool, codename) == ("add", "INVALID_ARGS") and "$.a" in message


async def test_an_uncaught_tool_call_error_fails_the_run_with_the_code(
    rt: ptc.ToolRuntime,
) -> None:
    rt.root.guard(lambda ex: "nope" if ex.name == "add" else None)
    add_tools(rt)
    result = await rt.root.run_code("print('before')\ntools.add(a=1, b=2)")
    message = result.error.message  # type: ignore[union-attr]
    assert message.startswith("code run failed (exception): Traceback")
    assert 'File "<program>", line 2' in message
    assert "ToolCallError: add: DENIED: nope" in message
    assert message.endswith("\nCaptured output:\nbefore\n")


@pytest.mark.parametrize(
    "argument",
    ["float('nan')", "float('inf')", "{1: 'int key'}", "{'a', 'set'}", "object()", "b'bytes'"],
)
async def test_non_json_arguments_are_rejected_before_dispatch(
    rt: ptc.ToolRuntime, argument: str
) -> None:
    calls: list[object] = []

    @rt.tool
    def take(value: Any) -> int:
        """Takes anything."""
        calls.append(value)
        return 1

    result = await rt.root.run_code(f"return tools.take(value={argument})")
    assert error_code(result) == "CODE_RUN_FAILED"
    assert "(exception)" in result.error.message  # type: ignore[union-attr]
    assert calls == []
    assert data(result.meta)["dispatch_log"] == []


async def test_deep_arguments_pass_and_the_logged_copy_is_independent(
    rt: ptc.ToolRuntime,
) -> None:
    received: list[Any] = []

    @rt.tool
    def depth(tree: Any) -> int:
        """Counts nesting depth."""
        received.append(tree)
        n = 0
        while "child" in tree:
            tree, n = tree["child"], n + 1
        return n

    code = (
        "tree = {'leaf': [1, 2.5, None, True, 'x']}\n"
        "for _ in range(150):\n    tree = {'child': tree}\n"
        "return tools.depth(tree=tree)"
    )
    result = await rt.root.run_code(code)
    assert ok(result) == 150
    (entry,) = data(result.meta)["dispatch_log"]
    logged = entry["arguments"]["tree"]
    assert logged == received[0]
    assert logged is not received[0]
    with pytest.raises(TypeError):
        received[0]["extra"] = 1  # the dispatched arguments are frozen


async def test_a_tool_named_proto_is_callable_as_t___proto__(rt: ptc.ToolRuntime) -> None:
    async def execute(arguments: Any, context: Any) -> Any:
        return {"got": dict(arguments)}

    rt.register(
        ptc.define_tool(
            name="__proto__",
            description="A name that is special in JavaScript.",
            input_schema={"type": "object", "properties": {"constructor": {"type": "string"}}},
            output=ptc.Output({"type": "object"}, lambda v: [{"type": "text", "text": "ok"}]),
            execute=execute,
        )
    )
    assert "def t___proto__" in rt.root.sdk()
    result = await rt.root.run_code("return tools.t___proto__(constructor='x')")
    assert ok(result) == {"got": {"constructor": "x"}}
    assert data(result.meta)["dispatch_log"][0]["name"] == "__proto__"


# -- scheduling inside a run -----------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def at(self, event: str) -> int:
        return self.events.index(event)


async def test_parallel_safe_calls_from_map_overlap(rt: ptc.ToolRuntime) -> None:
    started = {"a": anyio.Event(), "b": anyio.Event()}

    @rt.tool(concurrency_safe=True)
    async def meet(me: str, other: str) -> str:
        """Waits until the other call has started too."""
        started[me].set()
        with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
            await started[other].wait()
        return me

    code = "return tools.meet.map([{'me': 'a', 'other': 'b'}, {'me': 'b', 'other': 'a'}])"
    assert ok(await rt.root.run_code(code)) == ["a", "b"]


async def test_parallel_thunks_overlap_and_return_in_submission_order(
    rt: ptc.ToolRuntime,
) -> None:
    second_done = anyio.Event()
    order: list[str] = []

    @rt.tool(concurrency_safe=True)
    async def first() -> str:
        """Finishes only after `second` has finished."""
        with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
            await second_done.wait()
        order.append("first")
        return "first"

    @rt.tool(concurrency_safe=True)
    async def second() -> str:
        """Finishes at once."""
        order.append("second")
        second_done.set()
        return "second"

    result = await rt.root.run_code(
        "return parallel(lambda: tools.first(), lambda: tools.second())"
    )
    assert ok(result) == ["first", "second"]
    assert order == ["second", "first"]
    assert [e["name"] for e in data(result.meta)["dispatch_log"]] == ["first", "second"]


async def test_gathered_awaits_are_one_batch_scheduled_like_map(rt: ptc.ToolRuntime) -> None:
    started = {"a": anyio.Event(), "b": anyio.Event()}

    @rt.tool(concurrency_safe=True)
    async def meet(me: str, other: str) -> str:
        """Waits until the other call has started too."""
        started[me].set()
        with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
            await started[other].wait()
        return me

    code = (
        "import asyncio\n"
        "first = await tools.meet(me='a', other='a')\n"
        "async def both():\n"
        "    return await asyncio.gather(\n"
        "        tools.meet(me='a', other='b'), tools.meet(me='b', other='a'))\n"
        "[first, *await both()]"
    )
    result = await rt.root.run_code(code, call_id="o")
    assert ok(result) == ["a", "a", "b"]
    log = data(result.meta)["dispatch_log"]
    assert [e["sub_call_id"] for e in log] == ["o:ptc:1", "o:ptc:2", "o:ptc:3"]


async def test_exclusive_calls_are_barriers_and_pre_execute_never_overlaps(
    rt: ptc.ToolRuntime,
) -> None:
    rec = Recorder()
    started = {"a": anyio.Event(), "b": anyio.Event(), "c": anyio.Event(), "d": anyio.Event()}
    partner = {"a": "b", "b": "a", "c": "d", "d": "c"}

    @rt.tool(concurrency_safe=True)
    async def safe(me: str) -> str:
        """A parallel-safe call that meets its partner."""
        rec.events.append(f"start:{me}")
        started[me].set()
        with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
            await started[partner[me]].wait()
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        rec.events.append(f"end:{me}")
        return me

    @rt.tool
    async def exclusive(me: str) -> str:
        """An exclusive call that yields a lot while it runs."""
        rec.events.append(f"start:{me}")
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        rec.events.append(f"end:{me}")
        return me

    async def pre(ex: ptc.ToolExecution, nxt: Any) -> Any:
        if ex.parent is not None:
            rec.events.append(f"pre-in:{ex.arguments['me']}")
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            rec.events.append(f"pre-out:{ex.arguments['me']}")
        return await nxt()

    rt.on("tools/pre-execute", pre)
    code = (
        "return parallel(lambda: tools.safe(me='a'), lambda: tools.safe(me='b'),\n"
        "                lambda: tools.exclusive(me='x'),\n"
        "                lambda: tools.safe(me='c'), lambda: tools.safe(me='d'))"
    )
    assert ok(await rt.root.run_code(code)) == ["a", "b", "x", "c", "d"]
    # The handshakes above prove a/b and c/d overlapped; x ran alone between them.
    assert rec.at("start:x") > max(rec.at("end:a"), rec.at("end:b"))
    assert rec.at("end:x") < min(rec.at("start:c"), rec.at("start:d"))
    pre_events = [e for e in rec.events if e.startswith("pre-")]
    assert len(pre_events) == 10
    for i in range(0, 10, 2):
        assert pre_events[i].startswith("pre-in:") and pre_events[i + 1].startswith("pre-out:")
        assert pre_events[i][7:] == pre_events[i + 1][8:]


async def test_the_parallel_cap_comes_from_limits_max_parallel_calls() -> None:
    async with make_runtime(limits=ptc.Limits(max_parallel_calls=2)) as runtime:
        running = 0
        peak = 0

        @runtime.tool(concurrency_safe=True)
        async def busy(n: int) -> int:
            """Counts how many bodies run at once."""
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            running -= 1
            return n

        result = await runtime.root.run_code("return tools.busy.map([{'n': i} for i in range(6)])")
        assert ok(result) == list(range(6))
        assert peak == 2


# -- the dispatch log ------------------------------------------------------------------


async def test_one_dispatch_log_record_per_nested_call(rt: ptc.ToolRuntime) -> None:
    add_tools(rt)
    rt.root.guard(lambda ex: "no" if ex.arguments.get("text") == "no" else None)
    code = (
        "tools.add(a=1, b=2)\ntools.add.map([{'a': 3, 'b': 4}])\n"
        "try:\n    tools.shout(text='no')\nexcept ToolCallError:\n    pass\n"
        "return tools.shout(text='hi')"
    )
    result = await rt.root.run_code(code, call_id="o")
    assert ok(result) == "HI"
    log = data(result.meta)["dispatch_log"]
    assert set(log[0]) == {
        "sub_call_id",
        "name",
        "arguments",
        "is_error",
        "error_code",
        "content",
        "duration_ms",
        "replayed",
    }
    assert [(e["sub_call_id"], e["name"], e["is_error"], e["error_code"]) for e in log] == [
        ("o:ptc:1", "add", False, None),
        ("o:ptc:2", "add", False, None),
        ("o:ptc:3", "shout", True, "DENIED"),
        ("o:ptc:4", "shout", False, None),
    ]
    assert log[1]["arguments"] == {"a": 3, "b": 4}
    assert log[2]["content"] == [{"type": "text", "text": "Error: no"}]
    wall_ms = data(result.meta)["stats"]["wall_ms"]
    assert all(0 < e["duration_ms"] <= wall_ms for e in log), (wall_ms, log)
    assert data(result.meta)["stats"]["calls"] == 4
    # The log lives in meta only, never in the model-visible content.
    assert "o:ptc:" not in text_of(result)


async def test_the_dispatch_log_waterfall_rewrites_the_logged_content(
    rt: ptc.ToolRuntime,
) -> None:
    add_tools(rt)
    entries: list[ptc.DispatchLogEntry] = []

    async def redact(entry: ptc.DispatchLogEntry, nxt: Any) -> Any:
        entries.append(entry)
        original = await nxt()
        return [{"type": "text", "text": f"[{entry.name}: {len(original)} block(s)]"}]

    rt.on("tools/ptc-dispatch-log", redact)
    result = await rt.root.run_code("return tools.add(a=1, b=2)", call_id="outer")
    assert ok(result) == 3  # the program still got the real value
    (logged,) = data(result.meta)["dispatch_log"]
    assert logged["content"] == [{"type": "text", "text": "[add: 1 block(s)]"}]
    (entry,) = entries
    assert entry.execution.call_id == "outer" and entry.execution.name == "run_code"
    assert entry.sub_call_id == "outer:ptc:1" and entry.name == "add"
    assert entry.arguments == {"a": 1, "b": 2} and entry.is_error is False
    assert entry.content == [{"type": "text", "text": "3"}]


@pytest.mark.parametrize("failure", ["raise", "not content"])
async def test_a_failing_dispatch_log_listener_logs_the_original(
    rt: ptc.ToolRuntime, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    add_tools(rt)

    async def broken(entry: ptc.DispatchLogEntry, nxt: Any) -> Any:
        if failure == "raise":
            raise RuntimeError("log listener bug")
        return 42

    rt.on("tools/ptc-dispatch-log", broken)
    result = await rt.root.run_code("return tools.add(a=1, b=2)")
    assert ok(result) == 3
    assert data(result.meta)["dispatch_log"][0]["content"] == [{"type": "text", "text": "3"}]
    assert "dispatch-log listener failed" in caplog.text


async def test_a_scoped_dispatch_log_listener_sees_only_its_scope() -> None:
    async with make_runtime(default_mode="native") as runtime:
        add_tools(runtime)
        watched, other = runtime.scope("watched"), runtime.scope("other")
        watched.present_as("code")
        other.present_as("code")
        names: list[str] = []

        async def listen(entry: ptc.DispatchLogEntry, nxt: Any) -> Any:
            names.append(entry.execution.scope.name)
            return await nxt()

        watched.on("tools/ptc-dispatch-log", listen)
        await other.run_code("return tools.add(a=1, b=1)")
        await watched.run_code("return tools.add(a=1, b=1)")
        assert names == ["watched"]


# -- aborts ----------------------------------------------------------------------------


async def test_an_outer_abort_aborts_the_nested_call_and_ends_the_run_as_aborted(
    rt: ptc.ToolRuntime,
) -> None:
    in_flight = anyio.Event()
    started: list[int] = []
    nested_results: list[ptc.ToolResult] = []
    rt.on("tools/result", nested_results.append)
    body_saw_cancel: list[bool] = []

    @rt.tool(concurrency_safe=True)
    async def hang(n: int, context: ptc.ToolContext) -> int:
        """Waits until cancelled."""
        started.append(n)
        if len(started) == 2:
            in_flight.set()
        with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
            await context.signal.wait()
        body_saw_cancel.append(context.signal.cancelled)
        return 0

    signal = ptc.CancelSignal()
    outcome: list[ptc.ToolResult] = []

    async def run() -> None:
        outcome.append(
            await rt.root.run_code(
                "print('working')\nreturn tools.hang.map([{'n': 1}, {'n': 2}])",
                signal=signal,
                call_id="o",
            )
        )

    with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await in_flight.wait()
            signal.cancel("user pressed stop")
    (result,) = outcome
    assert error_code(result) == "ABORTED"
    assert result.error.message.endswith("Captured output:\nworking\n")  # type: ignore[union-attr]
    nested = {r.call_id: error_code(r) for r in nested_results if r.call_id != "o"}
    assert nested == {"o:ptc:1": "ABORTED", "o:ptc:2": "ABORTED"}
    assert body_saw_cancel in ([], [True], [True, True])


async def test_a_pre_aborted_run_code_never_reaches_the_worker() -> None:
    class CountingBackend(FakeBackend):
        runs = 0

        async def run(self, request: RunRequest, **kwargs: Any) -> RunOutcome:
            CountingBackend.runs += 1
            return await super().run(request, **kwargs)

    async with make_runtime(backend=CountingBackend()) as runtime:
        signal = ptc.CancelSignal()
        signal.cancel()
        result = await runtime.root.run_code("return 1", signal=signal)
    assert error_code(result) == "ABORTED_BEFORE_DISPATCH"
    assert CountingBackend.runs == 0


async def test_closing_the_runtime_mid_run_ends_the_run_as_abort() -> None:
    # Not entered with `async with`: aclose() is then callable from any task.
    runtime = make_runtime()
    in_flight = anyio.Event()
    outcome: list[ptc.ToolResult] = []

    @runtime.tool
    async def hang(context: ptc.ToolContext) -> int:
        """Waits until cancelled."""
        in_flight.set()
        await context.signal.wait()
        return 0

    async def run() -> None:
        outcome.append(await runtime.root.run_code("print('x')\nreturn tools.hang()"))

    with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await in_flight.wait()
            await runtime.close()
    (result,) = outcome
    assert error_code(result) == "CODE_RUN_FAILED"
    assert result.error.message.startswith("code run failed (abort): ")  # type: ignore[union-attr]
    assert result.error.message.endswith("Captured output:\nx\n")  # type: ignore[union-attr]
    after = await runtime.root.run_code("return 1")
    assert "(abort)" in after.error.message  # type: ignore[union-attr]


# -- the result: content, failures, meta -----------------------------------------------


@pytest.mark.parametrize(
    ("code", "text"),
    [
        ("pass", "(run_code completed with no output)"),
        ("return None", "(run_code completed with no output)"),
        ("return 'plain text'", "plain text"),
        ("return ''", "(run_code completed with no output)"),
        ("return {'a': [1, 2]}", json.dumps({"a": [1, 2]}, indent=2)),
        ("return 7", "7"),
        ("return [True, None]", "[\n  true,\n  null\n]"),
        ("print('out')\nreturn None", "out"),
        ("print('out')\nreturn 'res'", "out\nres"),
        ("print('a')\nprint('b')\nreturn {'k': 1}", 'a\nb\n{\n  "k": 1\n}'),
        ("1 + 2", "3"),
    ],
)
async def test_run_code_content_rendering(rt: ptc.ToolRuntime, code: str, text: str) -> None:
    result = await rt.root.run_code(code)
    assert not result.is_error, result.error
    assert text_of(result) == text


async def test_the_canonical_value_has_result_and_stdout(rt: ptc.ToolRuntime) -> None:
    result = await rt.root.run_code("import sys\nprint('o')\nprint('e', file=sys.stderr)\n")
    assert result.value == {"result": None, "stdout": "o\ne\n"}


@pytest.mark.parametrize(
    ("code", "kind", "detail"),
    [
        ("print('p')\nraise ValueError('boom')", "exception", "ValueError: boom"),
        ("print('p')\nreturn object()", "invalid-result", ""),
        ("print('p')\nreturn {1, 2}", "invalid-result", ""),
        ("x = (", "syntax", "line 1"),
        ("tools.nope()", "preflight", "tools.nope"),
    ],
)
async def test_code_run_failed_message_shape(
    rt: ptc.ToolRuntime, code: str, kind: str, detail: str
) -> None:
    result = await rt.root.run_code(code)
    assert error_code(result) == "CODE_RUN_FAILED"
    message = result.error.message  # type: ignore[union-attr]
    head, sep, output = message.partition("\nCaptured output:\n")
    assert sep
    assert head.startswith(f"code run failed ({kind}): ")
    assert detail in head
    assert output == ("p\n" if code.startswith("print") else "")
    assert text_of(result) == f"Error: {message}"


async def test_exception_detail_is_the_programs_own_frames_only(rt: ptc.ToolRuntime) -> None:
    result = await rt.root.run_code("def f():\n    return 1 / 0\n\nf()")
    message = result.error.message  # type: ignore[union-attr]
    assert 'File "<program>", line 4' in message and 'File "<program>", line 2' in message
    assert "ZeroDivisionError" in message
    assert "worker" not in message and "ptc" not in message.replace("<program>", "")


async def test_a_call_limit_ends_the_run() -> None:
    async with make_runtime(limits=ptc.Limits(max_calls=3)) as runtime:
        add_tools(runtime)
        result = await runtime.root.run_code("for i in range(10):\n    print(tools.add(a=i, b=0))")
    message = result.error.message  # type: ignore[union-attr]
    assert message.startswith("code run failed (call-limit): ")
    assert message.endswith("Captured output:\n0\n1\n2\n")
    assert len(data(result.meta)["dispatch_log"]) == 3


async def test_meta_keys_of_a_success_and_a_failure(rt: ptc.ToolRuntime) -> None:
    add_tools(rt)
    success = await rt.root.run_code("print('x')\nreturn tools.add(a=1, b=1)")
    assert set(success.meta) == {"dispatch_log", "enforcement", "stats", "output"}
    assert set(data(success.meta)["enforcement"]) == {
        "filesystem",
        "network",
        "processes",
        "memory",
        "cpu",
    }
    for dimension in data(success.meta)["enforcement"].values():
        assert set(dimension) == {"level", "mechanism", "gap"}
    assert set(data(success.meta)["stats"]) == {"wall_ms", "cpu_ms", "calls", "peak_memory_kib"}
    assert data(success.meta)["stats"]["calls"] == 1
    assert data(success.meta)["output"] == {"total_bytes": 2, "truncated": False}
    failure = await rt.root.run_code("raise KeyError('k')")
    assert data(failure.meta)["failure"]["kind"] == "exception"
    assert "KeyError" in data(failure.meta)["failure"]["detail"]
    preflight = await rt.root.run_code("tools.nope()")
    assert data(preflight.meta)["failure"]["kind"] == "preflight"


async def test_run_code_arguments_are_validated(rt: ptc.ToolRuntime) -> None:
    assert error_code(await rt.root.call("run_code", {})) == "INVALID_ARGS"
    assert error_code(await rt.root.call("run_code", {"code": ""})) == "INVALID_ARGS"
    assert error_code(await rt.root.call("run_code", {"code": "1", "x": 1})) == "INVALID_ARGS"
    described = await rt.root.run_code("return 1", description="returns one")
    assert ok(described) == 1


async def test_run_code_is_always_exclusive_in_call_many(rt: ptc.ToolRuntime) -> None:
    rec: list[str] = []

    @rt.tool(concurrency_safe=True)
    async def mark(tag: str) -> str:
        """Records start and end."""
        rec.append(f"start:{tag}")
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        rec.append(f"end:{tag}")
        return tag

    calls = [
        ptc.ToolCall("run_code", {"code": "return tools.mark(tag='one')"}),
        ptc.ToolCall("run_code", {"code": "return tools.mark(tag='two')"}),
    ]
    results = await rt.root.call_many(calls)
    assert [ok(r) for r in results] == ["one", "two"]
    assert rec == ["start:one", "end:one", "start:two", "end:two"]


async def test_visibility_is_rechecked_at_dispatch_time(rt: ptc.ToolRuntime) -> None:
    disposers: list[ptc.Disposer] = []

    @rt.tool
    def retire() -> str:
        """Unregisters `doomed` while the program runs."""
        disposers[0]()
        return "retired"

    @ptc.tool
    def doomed() -> str:
        """Gone by the time the program calls it."""
        return "still here"

    disposers.append(rt.register(doomed))
    code = (
        "out = [tools.retire()]\n"
        "try:\n    out.append(tools.doomed())\n"
        "except ToolCallError as e:\n    out.append(e.code)\n"
        "return out"
    )
    assert ok(await rt.root.run_code(code)) == ["retired", "UNKNOWN_TOOL"]


async def test_a_pending_ask_resolves_as_ask_cancelled_when_the_run_is_aborted() -> None:
    asked = anyio.Event()
    never = anyio.Event()

    async def slow_approver(request: ptc.ApprovalRequest) -> Any:
        asked.set()
        await never.wait()
        return "allowed-once"

    async with make_runtime(approver=slow_approver) as runtime:
        add_tools(runtime)

        async def ask(ex: ptc.ToolExecution, nxt: Any) -> Any:
            return ptc.Ask("sure?") if ex.parent is not None else await nxt()

        runtime.on("tools/pre-execute", ask)
        nested: list[ptc.ToolResult] = []
        runtime.on("tools/result", nested.append)
        signal = ptc.CancelSignal()
        outcome: list[ptc.ToolResult] = []

        async def run() -> None:
            outcome.append(
                await runtime.root.run_code(
                    "return tools.add(a=1, b=1)", signal=signal, call_id="o"
                )
            )

        with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await asked.wait()
                signal.cancel()
    (result,) = outcome
    assert error_code(result) == "ABORTED"
    assert [(r.call_id, error_code(r)) for r in nested if r.call_id != "o"] == [
        ("o:ptc:1", "ASK_CANCELLED")
    ]


@pytest.mark.parametrize(
    "worker", ["fake", pytest.param("subprocess", marks=pytest.mark.needs_root)]
)
async def test_a_host_error_in_nested_dispatch_ends_the_run_with_that_error(
    worker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # worker/_abc.py: a call handler that raises is a host bug; the run is killed and the
    # error propagates from the backend's run. The same whatever the backend: a backend
    # that awaits the handler (the fake, Ray) and one handed the batch (subprocess).
    from ptc._code._dispatch_log import DispatchLog

    async def broken(*args: object) -> None:
        raise RuntimeError("host bug in the dispatch log")

    monkeypatch.setattr(DispatchLog, "live", broken)
    backend = FakeBackend() if worker == "fake" else None  # None: the runtime's own
    async with make_runtime(backend=backend) as runtime:
        add_tools(runtime)
        with anyio.fail_after(DEADLOCK_GUARD_SECONDS):
            result = await runtime.root.run_code("return tools.add(a=1, b=2)")
    assert error_code(result) == "TOOL_ERROR"
    assert result.error is not None and "host bug in the dispatch log" in result.error.message
