"""The worker module's contract: calls, .map, parallel, errors, and what it exposes."""

from __future__ import annotations

import ast
from typing import Any

import pytest

import sdkgen

from .cases import CASES, all_specs
from .fake_transport import FakeTransport, load_module

SEARCH = sdkgen.ToolSpec(
    name="web-search",
    description="Search.",
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "from": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    output_schema={"type": "object", "properties": {"hits": {"type": "array"}}},
)
PING = sdkgen.ToolSpec(name="ping", input_schema={"type": "object", "additionalProperties": False})
# No `additionalProperties: false`: the host accepts other keys, so the SDK sends them.
TAG = sdkgen.ToolSpec(
    name="tag",
    input_schema={
        "type": "object",
        "properties": {
            "from": {"type": "string"},
            "ids": {"type": "array", "items": {"type": "integer"}},
        },
    },
)


@pytest.fixture(scope="module")
def sdk() -> sdkgen.Sdk:
    return sdkgen.generate([SEARCH, PING, TAG])


def _failing_on(bad: str) -> FakeTransport:
    def answer(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
        if args.get("query") == bad:
            return False, ("TOOL_ERROR", f"boom {bad}")
        return True, args.get("query")

    return FakeTransport(answer)


def test_a_call_sends_original_names_and_keys_and_leaves_out_omitted_optionals(
    sdk: sdkgen.Sdk,
) -> None:
    transport = FakeTransport()
    ns = load_module(sdk, transport)
    value = ns["tools"].web_search(query="q", from_="me")
    assert transport.batches == [[("web-search", {"query": "q", "from": "me"})]]
    assert value == {"tool": "web-search", "args": {"query": "q", "from": "me"}}
    assert ns["tools"].ping() == {"tool": "ping", "args": {}}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.web_search(query="q", nope=1), "unexpected keyword argument(s) nope; valid"),
        (lambda t: t.web_search(query="q", **{"from": 1}), "valid: query, from_, limit"),
        (lambda t: t.web_search(limit=1), "missing required keyword argument(s): query"),
        (lambda t: t.web_search("q"), "keyword arguments only"),
        (lambda t: t.ping(x=1), "valid: none"),
    ],
)
def test_bad_arguments_raise_type_error_naming_the_valid_ones(
    sdk: sdkgen.Sdk, call: Any, message: str
) -> None:
    transport = FakeTransport()
    ns = load_module(sdk, transport)
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(ns["tools"])
    assert transport.batches == []


def test_an_open_input_sends_other_keywords_as_they_are(sdk: sdkgen.Sdk) -> None:
    transport = FakeTransport()
    tools = load_module(sdk, transport)["tools"]
    tools.tag(from_="me", other=1, **{"x-trace": "t"})
    tools.tag.map([{"colour": "red"}])
    assert transport.batches == [
        [("tag", {"from": "me", "other": 1, "x-trace": "t"})],
        [("tag", {"colour": "red"})],
    ]
    binding = {b.ident: b for b in sdk.tools}
    assert binding["tag"].extra and not binding["web_search"].extra
    assert "def tag(*, from_: str = ..., ids: list[int] = ..., **extra: JSON)" in sdk.stub


def test_an_extra_keyword_may_not_carry_a_declared_key(sdk: sdkgen.Sdk) -> None:
    transport = FakeTransport()
    tools = load_module(sdk, transport)["tools"]
    with pytest.raises(TypeError, match="'from' must be passed by parameter name"):
        tools.tag(**{"from": "me"})
    assert transport.batches == []


def test_tuples_are_sent_as_lists_at_any_depth(sdk: sdkgen.Sdk) -> None:
    transport = FakeTransport()
    ns = load_module(sdk, transport)
    ns["tools"].tag(ids=(1, 2), nested={"pairs": [(1, "a"), (2, ("b",))]})
    ns["parallel"](lambda: ns["tools"].tag(ids=(3,)))
    sent = [args for batch in transport.batches for _, args in batch]
    assert sent == [{"ids": [1, 2], "nested": {"pairs": [[1, "a"], [2, ["b"]]]}}, {"ids": [3]}]
    assert all(type(v) is list for v in (sent[0]["ids"], sent[0]["nested"]["pairs"][1][1]))


def test_tuples_deeper_than_the_protocol_allows_are_left_for_the_transport_to_refuse(
    sdk: sdkgen.Sdk,
) -> None:
    transport = FakeTransport()
    deep: object = ()
    for _ in range(1000):
        deep = (deep,)
    load_module(sdk, transport)["tools"].tag(ids=deep)  # no RecursionError on the way
    value = transport.batches[0][0][1]["ids"]
    depth = 0
    while type(value) is list:
        value, depth = value[0], depth + 1
    assert type(value) is tuple and depth == 200


def test_a_failed_call_raises_tool_call_error(sdk: sdkgen.Sdk) -> None:
    ns = load_module(sdk, _failing_on("x"))
    with pytest.raises(ns["ToolCallError"]) as info:
        ns["tools"].web_search(query="x")
    error = info.value
    assert (error.tool, error.code, error.message) == ("web-search", "TOOL_ERROR", "boom x")
    assert str(error) == "web-search: TOOL_ERROR: boom x"
    assert isinstance(error, Exception)


def test_map_sends_one_batch_and_returns_results_in_order(sdk: sdkgen.Sdk) -> None:
    transport = _failing_on("never")
    ns = load_module(sdk, transport)
    result = ns["tools"].web_search.map([{"query": "a"}, {"query": "b", "limit": 2}])
    assert result == ["a", "b"]
    assert transport.batches == [
        [("web-search", {"query": "a"}), ("web-search", {"query": "b", "limit": 2})]
    ]
    assert ns["tools"].web_search.map([]) == []


def test_map_raises_the_first_error_in_submission_order(sdk: sdkgen.Sdk) -> None:
    def answer(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
        return False, ("DENIED", args["query"])

    ns = load_module(sdk, FakeTransport(answer))
    with pytest.raises(ns["ToolCallError"], match="DENIED: b"):
        ns["tools"].web_search.map([{"query": "b"}, {"query": "a"}])


def test_map_validates_every_item_before_sending(sdk: sdkgen.Sdk) -> None:
    transport = FakeTransport()
    ns = load_module(sdk, transport)
    with pytest.raises(TypeError, match="missing required"):
        ns["tools"].web_search.map([{"query": "a"}, {"limit": 1}])
    with pytest.raises(TypeError, match="list of keyword dicts"):
        ns["tools"].web_search.map({"query": "a"})
    assert transport.batches == []


def test_parallel_records_one_call_per_thunk_and_sends_one_batch(sdk: sdkgen.Sdk) -> None:
    transport = FakeTransport()
    ns = load_module(sdk, transport)
    tools, parallel = ns["tools"], ns["parallel"]
    results = parallel(lambda: tools.ping(), lambda: tools.web_search(query="z"))
    assert [r["tool"] for r in results] == ["ping", "web-search"]
    assert transport.batches == [[("ping", {}), ("web-search", {"query": "z"})]]
    assert parallel() == []
    assert parallel([lambda: tools.ping()]) == [{"tool": "ping", "args": {}}]


def test_parallel_raises_the_first_error_in_order(sdk: sdkgen.Sdk) -> None:
    ns = load_module(sdk, _failing_on("bad"))
    tools = ns["tools"]
    with pytest.raises(ns["ToolCallError"], match="boom bad"):
        ns["parallel"](lambda: tools.web_search(query="ok"), lambda: tools.web_search(query="bad"))


@pytest.mark.parametrize(
    ("thunk", "message"),
    [
        (lambda t: None, "made 0 tool calls"),
        (lambda t: [t.ping(), t.ping()], "made 2 tool calls"),
        (lambda t: [t.ping()], "must return its tool call's result unchanged"),
        (lambda t: t.ping.map([{}]), "cannot be used inside a parallel"),
        ("not callable", "not callable"),
    ],
)
def test_parallel_rejects_thunks_that_are_not_exactly_one_call(
    sdk: sdkgen.Sdk, thunk: Any, message: str
) -> None:
    transport = FakeTransport()
    ns = load_module(sdk, transport)
    tools = ns["tools"]
    arg = (lambda: thunk(tools)) if callable(thunk) else thunk
    with pytest.raises(TypeError, match=message):
        ns["parallel"](arg)
    assert transport.batches == []
    assert tools.ping() == {"tool": "ping", "args": {}}  # recording mode was left


def test_tools_is_read_only_and_names_available_tools(sdk: sdkgen.Sdk) -> None:
    ns = load_module(sdk, FakeTransport())
    tools = ns["tools"]
    with pytest.raises(TypeError):
        tools.ping = None
    with pytest.raises(TypeError):
        del tools.ping
    with pytest.raises(TypeError):
        tools.ping.anything = 1
    with pytest.raises(TypeError):
        tools()
    with pytest.raises(AttributeError, match="tools: ping, tag, web_search .*catalog.search"):
        _ = tools.nope


def _public_reach(root: object, depth: int) -> list[object]:
    seen, frontier = [root], [root]
    for _ in range(depth):
        nxt = []
        for obj in frontier:
            for name in dir(obj):
                if name.startswith("_"):
                    continue
                try:
                    value = getattr(obj, name)
                except Exception:
                    continue
                if not any(value is s for s in seen):
                    seen.append(value)
                    nxt.append(value)
        frontier = nxt
    return seen


def test_no_public_attribute_path_reaches_the_transport(sdk: sdkgen.Sdk) -> None:
    transport = FakeTransport()
    ns = load_module(sdk, transport)
    error = ns["ToolCallError"]("t", "c", "m")
    for root in (ns["tools"], ns["parallel"], ns["ToolCallError"], error):
        reached = _public_reach(root, depth=3)
        assert not any(obj is transport or obj is ns for obj in reached)


def test_the_module_imports_only_the_standard_library_at_run_time() -> None:
    module = sdkgen.generate(all_specs()).module
    imports = [
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(module))
        if isinstance(node, ast.Import)
        for alias in node.names
    ] + [
        node.module.split(".")[0]
        for node in ast.walk(ast.parse(module))
        if isinstance(node, ast.ImportFrom) and node.module
    ]
    # Standard-library modules the zygote has loaded: nothing is read from disk in a run
    # (`opcode` comes with the preloaded asyncio, through inspect and dis).
    loaded = {"__future__", "threading", "sys", "collections", "warnings", "opcode"}
    assert set(imports) <= loaded


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_representative_module_executes_and_round_trips_keys(case: str) -> None:
    sdk = sdkgen.generate(CASES[case])
    transport = FakeTransport()
    ns = load_module(sdk, transport)
    for binding in sdk.tools:
        kwargs = {p.ident: f"v-{p.ident}" for p in binding.params if p.required}
        getattr(ns["tools"], binding.ident)(**kwargs)
        sent_name, sent_args = transport.batches[-1][0]
        assert sent_name == binding.name
        assert sent_args == {p.key: f"v-{p.ident}" for p in binding.params if p.required}


def test_a_restricted_profile_program_can_use_the_whole_sdk(sdk: sdkgen.Sdk) -> None:
    """Every name a program needs is public, so RestrictedPython compiles and runs it."""
    from RestrictedPython.compile import compile_restricted_exec
    from RestrictedPython.Eval import default_guarded_getitem
    from RestrictedPython.Guards import guarded_iter_unpack_sequence, safe_builtins

    program = (
        "one = tools.web_search(query='a')\n"
        "many = tools.web_search.map([{'query': 'b'}, {'query': 'c', 'limit': 2}])\n"
        "both = parallel(lambda: tools.ping(), lambda: tools.web_search(query='d'))\n"
        "try:\n"
        "    tools.web_search(query='bad')\n"
        "except ToolCallError as e:\n"
        "    caught = (e.tool, e.code, e.message)\n"
    )
    compiled = compile_restricted_exec(program)
    assert compiled.errors == () and compiled.code is not None
    ns = load_module(sdk, _failing_on("bad"))
    glb: dict[str, Any] = {
        "__builtins__": safe_builtins,
        "_getattr_": getattr,
        "_getitem_": default_guarded_getitem,
        "_getiter_": iter,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        **{name: ns[name] for name in ("tools", "parallel", "ToolCallError")},
    }
    exec(compiled.code, glb)
    assert glb["one"] == "a" and glb["many"] == ["b", "c"] and glb["both"] == [None, "d"]
    assert glb["caught"] == ("web-search", "TOOL_ERROR", "boom bad")
