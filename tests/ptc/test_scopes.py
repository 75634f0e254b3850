"""Scopes and visibility: the four-step view, restrictions, modes and model tool specs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptc
from ptc._scopes._scope import call_site
from tests._typing import data

from .helpers import echo_tool


@pytest.fixture
def runtime() -> ptc.ToolRuntime:
    runtime = ptc.ToolRuntime()
    for name in ("read", "write", "search", "delete"):
        runtime.register(echo_tool(name))
    return runtime


def visible(scope: ptc.Scope) -> list[str]:
    return list(scope.view().visible)


def test_children_inherit_root_tools_and_nearest_layer_wins(runtime: ptc.ToolRuntime) -> None:
    parent = runtime.scope("parent")
    child = parent.scope("child")
    override = echo_tool("read")
    parent.register(override)
    assert child.view().visible["read"] is override
    assert runtime.root.view().visible["read"] is not override


def test_lineage_is_the_scope_and_its_ancestors_root_first(runtime: ptc.ToolRuntime) -> None:
    parent = runtime.scope("parent")
    child = parent.scope("child")
    assert child.lineage == (runtime.root, parent, child)
    assert runtime.root.lineage == (runtime.root,)


@pytest.mark.anyio
async def test_run_code_on_a_native_scope_names_present_as(runtime: ptc.ToolRuntime) -> None:
    result = await runtime.scope("agent").run_code("return 1")
    assert result.error is not None and result.error.code == "UNKNOWN_TOOL"
    assert result.error.message == (
        'unknown tool `run_code`: this scope presents its tools natively; call `present_as("code")`'
        ' (or `"both"`) on it to offer `run_code`'
    )
    other = await runtime.root.call("nope", {})
    assert other.error is not None and other.error.message == "unknown tool `nope`"


def test_restriction_semantics_allow_intersects_and_deny_unions(runtime: ptc.ToolRuntime) -> None:
    parent = runtime.scope("parent")
    child = parent.scope("child")
    parent.restrict(allow=["read", "write", "search"])
    child.restrict(allow=["read", "write", "delete"])
    assert visible(child) == ["read", "write"]
    child.restrict(deny=["write"])
    assert visible(child) == ["read"]
    assert visible(parent) == ["read", "write", "search"]


def test_allow_empty_hides_everything_inherited_but_not_own_tools(runtime: ptc.ToolRuntime) -> None:
    scope = runtime.scope("agent")
    scope.register(echo_tool("report"))
    scope.restrict(allow=[])
    assert visible(scope) == ["report"]


def test_own_tools_survive_a_capability_filter_and_shadow_inherited(
    runtime: ptc.ToolRuntime,
) -> None:
    scope = runtime.scope("agent")
    own = echo_tool("read")
    scope.register(own)
    scope.restrict(deny=["read"])  # filters the inherited read, not the scope's own
    assert scope.view().visible["read"] is own


def test_view_names(runtime: ptc.ToolRuntime) -> None:
    parent = runtime.scope("parent")
    parent.register(echo_tool("mid"))
    child = parent.scope("child")
    child.register(echo_tool("own"))
    child.restrict(deny=["mid"])
    view = child.view()
    assert view.restrictable_names == {"read", "write", "search", "delete", "mid"}
    assert view.known_names == view.restrictable_names | {"own"}
    assert "mid" not in view.visible


def test_restrict_rejections(runtime: ptc.ToolRuntime) -> None:
    scope = runtime.scope("agent")
    scope.register(echo_tool("own"))
    with pytest.raises(ValueError, match="root"):
        runtime.root.restrict(deny=["read"])
    with pytest.raises(ValueError, match="allow=, deny="):
        scope.restrict()
    with pytest.raises(ValueError, match="run_code"):
        scope.restrict(deny=["run_code"])
    with pytest.raises(ValueError, match=r"\['nope', 'own'\].*restrictable names: \['delete'"):
        scope.restrict(allow=["nope", "own"])


def test_a_disposed_tool_leaves_its_restriction_inert(runtime: ptc.ToolRuntime) -> None:
    extra = runtime.register(echo_tool("extra"))
    scope = runtime.scope("agent")
    scope.restrict(deny=["extra"])
    extra()
    assert "extra" not in visible(scope)
    runtime.register(echo_tool("extra"))
    assert "extra" not in visible(scope)  # the deny still names it


def test_disposers_are_idempotent_and_undo(runtime: ptc.ToolRuntime) -> None:
    scope = runtime.scope("agent")
    undo = scope.restrict(deny=["read"])
    assert "read" not in visible(scope)
    undo()
    undo()
    assert "read" in visible(scope)


def test_duplicate_name_in_one_layer_raises(runtime: ptc.ToolRuntime) -> None:
    with pytest.raises(ValueError, match="already registered"):
        runtime.register(echo_tool("read"))
    runtime.scope("agent").register(echo_tool("read"))  # another layer is fine


def test_run_code_cannot_be_removed_registered_shadowed_or_restricted(
    runtime: ptc.ToolRuntime,
) -> None:
    scope = runtime.scope("agent")
    scope.present_as("code")
    with pytest.raises(ValueError):
        scope.register(echo_tool("run_code"))
    with pytest.raises(ValueError):
        scope.restrict(allow=["run_code"])
    scope.restrict(allow=[])
    assert visible(scope) == ["run_code"]


def test_the_three_modes_send_the_right_schemas(runtime: ptc.ToolRuntime) -> None:
    native, code, both = (runtime.scope(n) for n in ("native", "code", "both"))
    code.present_as("code")
    both.present_as("both")
    names = ["read", "write", "search", "delete"]
    assert [t["name"] for t in data(native.model_tools())] == names
    assert [t["name"] for t in data(code.model_tools())] == ["run_code"]
    assert [t["name"] for t in data(both.model_tools())] == [*names, "run_code"]


@pytest.mark.parametrize(
    ("fmt", "keys"),
    [
        ("raw", {"name", "description", "input_schema"}),
        ("anthropic", {"name", "description", "input_schema"}),
        ("mcp", {"name", "description", "inputSchema"}),
        ("openai", {"type", "function"}),
    ],
)
def test_model_tools_leak_no_callbacks_and_no_timeout(fmt: Any, keys: set[str]) -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(
        echo_tool(
            "slow",
            timeout_seconds=5,
            concurrency_safe=lambda a: True,
            output=ptc.Output({}, lambda v: [], presentation_meta={"icon": "x"}),
        )
    )
    (spec,) = data(runtime.root.model_tools(format=fmt))
    assert set(spec) == keys
    if fmt == "openai":
        assert set(spec["function"]) == {"name", "description", "parameters"}
    text = repr(spec)
    assert "timeout" not in text and "icon" not in text and "lambda" not in text


def test_per_agent_code_mode_and_inheritance(runtime: ptc.ToolRuntime) -> None:
    coder = runtime.scope("coder")
    coder.present_as("code", profile="restricted", limits=ptc.Limits(wall_seconds=5))
    helper = coder.scope("helper")
    plain = runtime.scope("plain")
    assert helper.code_options()[0] == "code"  # preset inheritance
    assert helper.code_options()[1] == "restricted"
    assert helper.code_options()[2].wall_seconds == 5
    assert "run_code" not in visible(plain)  # no run_code for native agents
    assert plain.code_options() == ("native", "python", runtime.limits)
    opted_out = coder.scope("opted-out")
    opted_out.present_as("native")  # opting out
    assert "run_code" not in visible(opted_out)
    assert opted_out.code_options()[1] == "restricted"  # options still resolve nearest-first


def test_default_restored_on_unload(runtime: ptc.ToolRuntime) -> None:
    coder = runtime.scope("coder")
    coder.present_as("code")
    child = coder.scope("child")
    coder.close()
    assert child._closed
    fresh = runtime.scope("coder")
    assert fresh.code_options()[0] == "native"


def test_duplicate_and_unscoped_declarations_rejected(runtime: ptc.ToolRuntime) -> None:
    scope = runtime.scope("agent")
    scope.present_as("both")
    with pytest.raises(ValueError, match="already"):
        scope.present_as("code")
    with pytest.raises(ValueError):
        runtime.root.present_as("code")
    with pytest.raises(ValueError):
        runtime.scope("other").present_as("sideways")  # type: ignore[arg-type]


def test_close_disposes_everything_the_scope_registered(runtime: ptc.ToolRuntime) -> None:
    scope = runtime.scope("agent")
    scope.register(echo_tool("own"))
    scope.guard(lambda ex: "no")
    scope.on("tools/result", lambda r: None)
    scope.close()
    site = call_site(scope)
    assert "own" not in scope.view().known_names and site.guards == ()
    assert site.listeners("tools/result") == [] and scope.closed
    assert runtime.root.children == ()
    with pytest.raises(RuntimeError, match="closed"):
        scope.register(echo_tool("again"))


def test_every_change_emits_tools_change(runtime: ptc.ToolRuntime) -> None:
    seen: list[ptc.Scope] = []
    runtime.on("tools/change", seen.append)
    scope = runtime.scope("agent")
    undo = scope.register(echo_tool("own"))
    scope.restrict(deny=["read"])
    scope.guard(lambda ex: None)
    scope.present_as("code")
    undo()
    assert seen == [scope] * 5


def test_a_batch_emits_one_tools_change_per_changed_scope(runtime: ptc.ToolRuntime) -> None:
    seen: list[ptc.Scope] = []
    runtime.on("tools/change", seen.append)
    scope = runtime.scope("agent")
    seen.clear()
    with scope.batch():
        undo = [scope.register(echo_tool(f"t{i}")) for i in range(3)]
        with scope.batch():  # nested: still one, at the end of the outermost
            runtime.register(echo_tool("rooted"))
        for dispose in undo:
            dispose()
        assert seen == []
        # Changes inside the batch are already visible.
        assert "rooted" in scope.view().visible and "t0" not in scope.view().visible
    assert seen == [scope, runtime.root]


def test_a_batch_that_raises_still_announces_its_changes(runtime: ptc.ToolRuntime) -> None:
    seen: list[ptc.Scope] = []
    runtime.on("tools/change", seen.append)
    with pytest.raises(ptc.ScopeError), runtime.root.batch():
        runtime.register(echo_tool("one"))
        runtime.register(echo_tool("one"))
    assert seen == [runtime.root]


def mcp_tool(**options: Any) -> ptc.ToolDefinition:
    return echo_tool("t", **options)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({}, None),
        ({"type": "object", "properties": {"a": {"type": "integer"}}}, "as is"),
        (
            {"type": "integer"},
            {
                "type": "object",
                "properties": {"result": {"type": "integer"}},
                "required": ["result"],
            },
        ),
        (
            {
                "$defs": {"Hit": {"type": "object"}},
                "type": "array",
                "items": {"$ref": "#/$defs/Hit"},
            },
            {
                "$defs": {"Hit": {"type": "object"}},
                "type": "object",
                "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/Hit"}}},
                "required": ["result"],
            },
        ),
    ],
)
def test_mcp_output_schema_is_an_object_schema(schema: Any, expected: Any) -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(mcp_tool(output=ptc.Output(schema, lambda v: [])))
    (spec,) = runtime.root.model_tools(format="mcp")
    if expected is None:
        assert "outputSchema" not in spec
    else:
        assert spec["outputSchema"] == (schema if expected == "as is" else expected)


def test_mcp_format_keeps_title_annotations_and_meta() -> None:
    runtime = ptc.ToolRuntime()
    runtime.register(
        mcp_tool(title="T", annotations={"readOnlyHint": True}, meta={"ui/icon": "t.png"})
    )
    (spec,) = runtime.root.model_tools(format="mcp")
    assert spec == {
        "name": "t",
        "title": "T",
        "description": "The t tool.",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
        "_meta": {"ui/icon": "t.png"},
    }
    # The other formats stay name, description and input schema only.
    assert set(runtime.root.model_tools(format="anthropic")[0]) == {
        "name",
        "description",
        "input_schema",
    }


def test_sdk_lists_exactly_the_visible_tools(runtime: ptc.ToolRuntime) -> None:
    scope = runtime.scope("agent")
    scope.restrict(allow=["read", "search"])
    tools_class = scope.sdk().split("\nclass tools:\n", 1)[1]
    defined = [line.strip() for line in tools_class.splitlines() if "    def " in line]
    assert [d.split("(")[0] for d in defined] == ["def call", "def read", "def search"]


NAMES = ["a", "b", "c", "d", "e"]
restrictions = st.lists(
    st.tuples(
        st.sampled_from(["parent", "child"]),
        st.none() | st.sets(st.sampled_from(NAMES)),
        st.sets(st.sampled_from(NAMES)),
    ),
    max_size=4,
)


def build(spec: list[tuple[str, Any, set[str]]]) -> tuple[ptc.ToolRuntime, ptc.Scope]:
    runtime = ptc.ToolRuntime()
    for name in NAMES:
        runtime.register(echo_tool(name))
    scopes = {"parent": runtime.scope("parent")}
    scopes["child"] = scopes["parent"].scope("child")
    for where, allow, deny in spec:
        if allow is None and not deny:
            continue
        scopes[where].restrict(allow=allow, deny=deny or None)
    return runtime, scopes["child"]


@settings(max_examples=60, deadline=None)
@given(
    restrictions,
    st.sampled_from(["parent", "child"]),
    st.none() | st.sets(st.sampled_from(NAMES)),
    st.sets(st.sampled_from(NAMES)),
)
def test_adding_a_restriction_never_makes_more_visible(
    spec: list[Any], where: str, allow: Any, deny: set[str]
) -> None:
    _, before = build(spec)
    _, after = build([*spec, (where, allow, deny)])
    assert set(after.view().visible) <= set(before.view().visible)


@settings(max_examples=60, deadline=None)
@given(restrictions.flatmap(lambda s: st.tuples(st.just(s), st.permutations(s))))
def test_restriction_order_does_not_matter(pair: Any) -> None:
    spec, shuffled = pair
    assert visible(build(spec)[1]) == visible(build(list(shuffled))[1])
