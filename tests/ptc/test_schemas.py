"""Schemas from the wild (DESIGN section 6): dialects, local-only references, every problem
at once with its path and the likely intended type, limits, and values shown as JSON."""

from __future__ import annotations

import http.server
import json
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from referencing.exceptions import Unresolvable

import ptc
from ptc._calls._tools import compact_json_render
from ptc._json import freeze
from ptc._schema._checks import MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, offline_registry
from ptc._schema._validator import MAX_PROBLEMS, compile_schema
from tests._typing import data
from worker.testing import FakeBackend

from .helpers import echo_tool

DRAFT_04 = "http://json-schema.org/draft-04/schema#"
DRAFT_06 = "http://json-schema.org/draft-06/schema#"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"


def define(input_schema: Any, output_schema: Any = None) -> ptc.ToolDefinition:
    output = ptc.Output({} if output_schema is None else output_schema, compact_json_render)
    return echo_tool("t", input_schema=input_schema, output=output)


def problems_of(schema: Any) -> tuple[str, ...]:
    with pytest.raises(ptc.SchemaError) as info:
        define(schema)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ptc.DefinitionError)
    return info.value.problems


# --- dialects ---------------------------------------------------------------------------


def obj(declared: str | None, **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if declared is not None:
        schema["$schema"] = declared
    return schema


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        # draft-04: a boolean exclusiveMinimum qualifies "minimum".
        (obj(DRAFT_04, n={"minimum": 5, "exclusiveMinimum": True}), {"n": 6}, {"n": 5}),
        # draft-06: exclusiveMinimum is a number.
        (obj(DRAFT_06, n={"exclusiveMinimum": 5}), {"n": 6}, {"n": 5}),
        # draft-07: items as an array is a tuple.
        (
            obj(DRAFT_07, p={"items": [{"type": "number"}, {"type": "string"}]}),
            {"p": [1, "a"]},
            {"p": ["a", 1]},
        ),  # fmt: skip
        # 2019-09: items array + additionalItems; $recursiveRef.
        (
            obj(DRAFT_2019, p={"items": [{"type": "number"}], "additionalItems": False}),
            {"p": [1]},
            {"p": [1, 2]},
        ),  # fmt: skip
        # 2020-12, declared and by default: prefixItems.
        (
            obj(DRAFT_2020, p={"prefixItems": [{"type": "number"}], "items": False}),
            {"p": [1]},
            {"p": [1, 2]},
        ),  # fmt: skip
        (
            obj(None, p={"prefixItems": [{"type": "number"}], "items": False}),
            {"p": [1]},
            {"p": [1, 2]},
        ),  # fmt: skip
    ],
)
def test_each_dialect_is_validated_with_its_own_rules(
    schema: dict[str, Any], good: dict[str, Any], bad: dict[str, Any]
) -> None:
    validator = define(schema).input_validator
    assert validator.problems(freeze(good)) == []
    assert validator.problems(freeze(bad)) != []


@pytest.mark.parametrize(
    ("declared", "dialect"),
    [
        (DRAFT_04, "draft-04"),
        ("http://json-schema.org/draft-04/schema", "draft-04"),
        ("https://json-schema.org/draft-07/schema#", "draft-07"),
        (DRAFT_2019, "2019-09"),
        (DRAFT_2020 + "#", "2020-12"),
        (None, "2020-12"),
    ],
)
def test_the_declared_dialect_is_recognised_in_its_common_spellings(
    declared: str | None, dialect: str
) -> None:
    assert define(obj(declared)).input_validator.dialect == dialect


def test_each_dialect_checks_the_schema_against_its_own_meta_schema() -> None:
    # A numeric exclusiveMinimum is draft-06+; draft-04's meta-schema wants a boolean.
    assert problems_of(obj(DRAFT_04, n={"exclusiveMinimum": 5})) == (
        "tool 't': input_schema.properties.n: \"minimum\" is required when "
        '"exclusiveMinimum" is present',
        "tool 't': input_schema.properties.n.exclusiveMinimum: 5 is not of type \"boolean\"; "
        'a numeric exclusiveMinimum is draft-06 and later: in draft-04 write "minimum" and '
        '"exclusiveMinimum": true',
    )
    # `const` means nothing in draft-04 (it is not validated) and everything in 2020-12.
    assert define(obj(DRAFT_04, c={"const": 1})).input_validator.problems(freeze({"c": 2})) == []
    assert define(obj(None, c={"const": 1})).input_validator.problems(freeze({"c": 2})) != []


@pytest.mark.parametrize(
    ("schema", "hint"),
    [
        (
            obj(None, n={"minimum": 5, "exclusiveMinimum": True}),
            "boolean exclusiveMinimum is draft-04",
        ),
        (obj(None, p={"items": [{"type": "number"}]}), 'use "prefixItems", or declare'),
    ],
)
def test_a_form_of_another_draft_says_how_to_declare_it(schema: dict[str, Any], hint: str) -> None:
    (problem,) = problems_of(schema)
    assert hint in problem


@pytest.mark.parametrize(
    "declared", ["http://json-schema.org/draft-03/schema#", "https://example.com/mine", 7]
)
def test_an_unknown_dialect_is_refused_listing_the_supported_ones(declared: object) -> None:
    (problem,) = problems_of({"$schema": declared, "type": "object"})
    assert problem.startswith("tool 't': input_schema.$schema: unknown dialect")
    for name in ("draft-04", "draft-06", "draft-07", "2019-09", "2020-12"):
        assert name in problem


# --- every problem at once, with the likely intended type -------------------------------


def test_every_problem_is_reported_at_once_with_its_path_and_the_intended_type() -> None:
    schema = {
        "type": "dict",
        "properties": {
            "a": {"type": "float"},
            "b": {"type": "String"},
            "c": {"type": "any"},
            "d": {"type": ["int", "null"]},
            "e": {"type": "strng"},
            "f": {"type": "Tensor"},
            "g": {"type": "string", "required": True},
            "h": {"type": "string", "minLength": "three"},
        },
    }
    problems = problems_of(schema)
    where = "tool 't': input_schema"
    assert problems == (
        f'{where}.properties.a.type: "float" is not a JSON Schema type (did you mean "number"?)',
        f'{where}.properties.b.type: "String" is not a JSON Schema type (did you mean "string"?)',
        f'{where}.properties.c.type: "any" is not a JSON Schema type (to allow any value, '
        'leave out "type")',
        f'{where}.properties.d.type: "int" is not a JSON Schema type (did you mean "integer"?)',
        f'{where}.properties.e.type: "strng" is not a JSON Schema type (did you mean "string"?)',
        f'{where}.properties.f.type: "Tensor" is not a JSON Schema type (the types are array, '
        "boolean, integer, null, number, object, string)",
        f'{where}.properties.g.required: true is not of type "array"; list required property '
        'names in the parent object\'s "required" (draft-03)',
        f'{where}.properties.h.minLength: "three" is not of type "integer"',
        f'{where}.type: "dict" is not a JSON Schema type (did you mean "object"?)',
    )


def test_reference_problems_come_with_the_meta_schema_ones() -> None:
    problems = problems_of({"type": "dict", "properties": {"a": {"$ref": "a.json"}}})
    assert len(problems) == 2
    assert problems[0].endswith(
        '.properties.a.$ref: "a.json" points outside this schema; '
        'only local references ("#...", within the same schema) are allowed'
    )
    assert problems[1].endswith('.type: "dict" is not a JSON Schema type (did you mean "object"?)')


@pytest.mark.parametrize(
    ("name", "intended"),
    [("dict", "object"), ("HashMap", "object"), ("float", "number"), ("double", "number"),
     ("long", "integer"), ("Integer", "integer"), ("tuple", "array"), ("ArrayList", "array"),
     ("set", "array"), ("bool", "boolean"), ("str", "string"), ("char", "string")],
)  # fmt: skip
def test_non_standard_type_names_get_their_likely_meaning(name: str, intended: str) -> None:
    (problem,) = problems_of({"type": "object", "properties": {"x": {"type": name}}})
    assert problem.endswith(f'(did you mean "{intended}"?)')


def test_the_output_schema_is_checked_the_same_way() -> None:
    with pytest.raises(ptc.SchemaError, match=r"output\.schema\.type: \"float\" .*\"number\""):
        define({"type": "object"}, {"type": "float"})


# --- references -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ref",
    [
        "http://127.0.0.1:9/s.json",
        "https://example.com/schema.json#/$defs/a",
        "file:///etc/passwd",
        "other.json",
        "other.json#/$defs/a",
        "/abs/path.json",
        "urn:uuid:12345678-1234-5678-1234-567812345678",
        DRAFT_2020,  # even a meta-schema ptc has offline
    ],
)
def test_a_reference_that_leaves_the_schema_is_refused_at_definition(ref: str) -> None:
    (problem,) = problems_of({"type": "object", "properties": {"a": {"$ref": ref}}})
    assert problem == (
        f"tool 't': input_schema.properties.a.$ref: {json.dumps(ref)} points outside this "
        'schema; only local references ("#...", within the same schema) are allowed'
    )


@pytest.mark.parametrize(
    "schema",
    [
        # $id-based resolution that would leave the document
        {"$id": "https://example.com/root.json", "properties": {"a": {"$ref": "b.json"}}},
        {"$id": "https://example.com/root.json", "properties": {"a": {"$ref": "root.json"}}},
        {"$dynamicRef": "https://example.com/meta#node"},
        {"$schema": DRAFT_2019, "$recursiveRef": "https://example.com/x"},
        # a local $ref that reaches a non-local one hidden in data
        {
            "properties": {
                "a": {"$ref": "#/properties/b/default"},
                "b": {"default": {"$ref": "x.json"}},
            }
        },
    ],
)
def test_every_way_out_of_the_document_is_refused(schema: dict[str, Any]) -> None:
    problems = problems_of(schema)
    assert any("points outside this schema" in p for p in problems)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"properties": {"a": {"$ref": "#/nope"}}}, '"#/nope" does not resolve'),
        ({"properties": {"a": {"$ref": "#/properties/b"}}}, '"#/properties/b" does not resolve'),
        ({"properties": {"a": {"$ref": "#missing-anchor"}}}, '"#missing-anchor" does not resolve'),
        ({"$ref": "#"}, "a loop that never descends into the value: # -> #"),
        (
            {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]},
                       "b": {"not": {"$ref": "#/$defs/a"}}},
             "properties": {"x": {"$ref": "#/$defs/a"}}},
            "#/$defs/a -> #/$defs/a/allOf/0 -> #/$defs/b -> #/$defs/b/not -> #/$defs/a",
        ),
    ],
)  # fmt: skip
def test_a_local_reference_to_nowhere_or_a_loop_is_a_clear_definition_error(
    schema: dict[str, Any], message: str
) -> None:
    problems = problems_of(schema)
    assert any(message in p for p in problems), problems


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        (
            {"$defs": {"node": {"type": "object", "properties": {
                "label": {"type": "string"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
             "properties": {"root": {"$ref": "#/$defs/node"}}},
            {"root": {"label": "a", "kids": [{"label": "b", "kids": []}]}},
            {"root": {"kids": [{"label": 1}]}},
        ),
        ({"definitions": {"n": {"type": "integer"}},
          "properties": {"a": {"$ref": "#/definitions/n"}}}, {"a": 1}, {"a": "1"}),
        ({"$defs": {"n": {"$anchor": "num", "type": "integer"}},
          "properties": {"a": {"$ref": "#num"}}}, {"a": 1}, {"a": "1"}),
        ({"$defs": {"a b": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/a%20b"}}},
         {"a": 1}, {"a": "1"}),
        ({"$id": "https://example.com/root.json", "$defs": {"n": {"type": "integer"}},
          "properties": {"a": {"$ref": "#/$defs/n"}}}, {"a": 1}, {"a": "1"}),
        ({"$defs": {"inner": {"$id": "https://example.com/inner.json",
                              "$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}},
          "properties": {"a": {"$ref": "#/$defs/inner"}}}, {"a": "x"}, {"a": 1}),
        ({"properties": {"a": {"default": {"$ref": "https://x"}, "enum": [{"$ref": "http://y"}]}}},
         {"a": {"$ref": "http://y"}}, {"a": 1}),
    ],
)  # fmt: skip
def test_local_references_resolve_and_data_that_looks_like_one_is_data(
    schema: dict[str, Any], good: dict[str, Any], bad: dict[str, Any]
) -> None:
    validator = define({"type": "object", **schema}).input_validator
    assert validator.problems(freeze(good)) == []
    assert validator.problems(freeze(bad)) != []


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: list[str]

    def do_GET(self) -> None:  # noqa: N802 - http.server's API
        self.requests.append(self.path)
        body = json.dumps({"type": "object", "properties": {"z": {"type": "string"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/schema+json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    requests: list[str] = []
    handler = type("Handler", (_Recorder,), {"requests": requests})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.anyio
async def test_no_schema_handling_ever_touches_the_network(
    schema_server: tuple[str, list[str]],
) -> None:
    base, requests = schema_server
    # The server answers: a fetch would succeed, so only never fetching keeps the count at 0.
    with pytest.raises(ptc.SchemaError):
        define({"type": "object", "properties": {"a": {"$ref": f"{base}/s.json"}}})
    with pytest.raises(ptc.SchemaError):
        define({"type": "object"}, {"$ref": f"{base}/out.json"})
    with pytest.raises(ptc.SchemaError):
        define({"$id": f"{base}/root.json", "properties": {"a": {"$ref": "other.json"}}})
    # Accepted: local references inside documents whose base URI is on that server.
    local: dict[str, Any] = {
        "$id": f"{base}/root.json",
        "$schema": DRAFT_07,
        "type": "object",
        "definitions": {"n": {"$id": f"{base}/n.json", "type": "integer"}},
        "properties": {"a": {"$ref": "#/definitions/n"}, "b": {"$ref": "#/properties/a"}},
    }
    definition = echo_tool(
        "probe", input_schema=local, output=ptc.Output(local, compact_json_render)
    )
    async with ptc.ToolRuntime(
        backend=FakeBackend(), containment=ptc.Containment(require=frozenset()),
        default_mode="code",
    ) as runtime:  # fmt: skip
        runtime.register(definition)
        assert "def probe(" in runtime.root.sdk()
        ok = await runtime.root.run_code("return tools.probe(a=1, b=2)")
        bad = await runtime.root.run_code("return tools.probe(a='x')")
    assert data(ok.value)["result"] == {"a": 1, "b": 2}
    assert "INVALID_ARGS" in bad.error.message  # type: ignore[union-attr]
    # And the registry every validator resolves through refuses to fetch what it lacks.
    with pytest.raises(Unresolvable):
        offline_registry().resolver().lookup(f"{base}/s.json")
    assert requests == []


def test_a_file_reference_is_refused_and_the_file_never_read(tmp_path: Path) -> None:
    target = tmp_path / "secret.json"
    target.write_text('{"type": "string"}')
    opened: list[str] = []

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and str(args[0]).endswith("secret.json"):
            opened.append(str(args[0]))

    sys.addaudithook(audit)  # hooks cannot be removed; this one only records one name
    for ref in (target.as_uri(), str(target), "secret.json"):
        with pytest.raises(ptc.SchemaError, match="points outside this schema"):
            define({"type": "object", "properties": {"a": {"$ref": ref}}})
    assert opened == []


# --- limits and shape -------------------------------------------------------------------


@pytest.fixture
def default_recursion_limit() -> Iterator[None]:
    """Python's default limit (an in-process mypy run raises it for the whole process)."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize("levels", [MAX_SCHEMA_DEPTH // 2, 3000])
@pytest.mark.usefixtures("default_recursion_limit")
def test_a_schema_nested_past_the_limit_is_a_clear_error_not_a_recursion_error(
    levels: int,
) -> None:
    (problem,) = problems_of(_nested(levels))
    assert problem.startswith(f"tool 't': input_schema: nested deeper than {MAX_SCHEMA_DEPTH}")
    assert "(the limit)" in problem


def test_a_schema_within_the_depth_limit_is_accepted_and_validates() -> None:
    # properties nesting costs two levels per object; this is the deepest accepted
    validator = define(_nested(MAX_SCHEMA_DEPTH // 2 - 1)).input_validator
    value: Any = "x"
    for _ in range(MAX_SCHEMA_DEPTH // 2 - 2):
        value = {"a": value}
    assert validator.problems(freeze({"a": value})) == []


@pytest.mark.parametrize(
    "schema",
    [{"not": {}}, {"items": {}}, {"anyOf": [{}, {"type": "null"}]}],
    ids=["not", "items", "anyOf"],
)
@pytest.mark.usefixtures("default_recursion_limit")
def test_the_worst_shapes_at_the_depth_limit_still_check_on_a_deep_stack(
    schema: dict[str, Any],
) -> None:
    key = next(iter(schema))
    deep: Any = {"type": "string"}
    levels = MAX_SCHEMA_DEPTH - 1 if key != "anyOf" else MAX_SCHEMA_DEPTH // 2 - 1
    for _ in range(levels):
        deep = {key: [deep, {"type": "null"}]} if key == "anyOf" else {key: deep}

    def at_depth(n: int) -> object:
        if n:
            return at_depth(n - 1)
        try:
            return compile_schema({"type": "object", "properties": {"x": deep}}, "s")
        except ptc.SchemaError as exc:
            return exc

    outcome = at_depth(150)  # the caller's own frames (a host, anyio, pytest)
    # Accepted, or refused for its depth: never a RecursionError from inside the check.
    assert not isinstance(outcome, ptc.SchemaError) or "deep" in str(outcome)


def test_a_schema_over_the_size_limit_names_the_limit() -> None:
    big = {"type": "object", "description": "x" * MAX_SCHEMA_BYTES}
    (problem,) = problems_of(big)
    assert problem.endswith(f"bytes as JSON; the limit is {MAX_SCHEMA_BYTES}")


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "maximum": float("nan")}, "input_schema.maximum: nan is not a JSON"),
        ({"type": "object", "required": ("a",)}, "input_schema.required: a tuple is not a JSON"),
        ({"type": "object", "properties": {1: {}}}, "input_schema.properties: object key 1"),
        ("object", "input_schema must be a JSON Schema object, got str"),
    ],
)
def test_a_schema_that_is_not_plain_json_is_refused_naming_the_path(
    schema: Any, problem: str
) -> None:
    (found,) = problems_of(schema)
    assert problem in found


def test_validators_are_cached_by_schema_content() -> None:
    first = compile_schema({"type": "object", "properties": {"a": {"type": "integer"}}}, "a")
    again = compile_schema({"properties": {"a": {"type": "integer"}}, "type": "object"}, "b")
    assert first is again


# --- values -------------------------------------------------------------------------------


def test_problems_with_values_show_the_values_as_json() -> None:
    schema = {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
            "mode": {"enum": ["fast", "slow"]},
            "flag": {"type": "boolean"},
            "tag": {"type": "string", "pattern": "^t-", "minLength": 3},
            "pick": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "nested": {"type": "object", "properties": {"k": {"const": [1, None]}}},
        },
        "required": ["ids", "missing"],
        "additionalProperties": False,
    }
    value = freeze({
        "ids": [1, "2", True], "mode": "medium", "flag": None, "tag": "x",
        "pick": [False], "nested": {"k": [1, True]}, "other": {"a": [None]},
    })  # fmt: skip
    problems = define(schema).input_validator.problems(value)
    assert problems == [
        '$.flag: null is not of type "boolean"',
        '$.ids: [1,"2",true] has more than 2 items',
        '$.ids[1]: "2" is not of type "integer"',
        '$.ids[2]: true is not of type "integer"',
        '$.mode: "medium" is not one of ["fast","slow"]',
        "$.nested.k: [1,true] is not [1,null]",
        "$.pick: [false] matches none of the allowed schemas (closest: [false] is not of "
        'type "integer")',
        '$.tag: "x" does not match the pattern "^t-"',
        '$.tag: "x" is shorter than 3 characters',
        '$: "missing" is a required property',
        '$: unexpected property "other"',
    ]
    assert not any("Frozen" in p or "'" in p for p in problems)


def test_many_problems_are_capped_with_a_count() -> None:
    validator = define(
        {"type": "object", "properties": {"xs": {"items": {"type": "string"}}}}
    ).input_validator
    problems = validator.problems(freeze({"xs": list(range(MAX_PROBLEMS + 5))}))
    assert len(problems) == MAX_PROBLEMS + 1 and problems[-1] == "... and 5 more"


@pytest.mark.usefixtures("default_recursion_limit")
def test_a_value_too_deep_to_validate_is_a_problem_not_an_exception() -> None:
    validator = compile_schema({"type": "object", "properties": {"c": {"$ref": "#"}}}, "tree")
    value: Any = {}
    for _ in range(2000):
        value = {"c": value}
    assert validator.problems(value) == ["$: nested too deeply to validate"]


@pytest.mark.anyio
async def test_invalid_args_from_a_direct_call_show_json_and_a_tuple_stays_invalid() -> None:
    async with ptc.ToolRuntime() as runtime:
        runtime.register(
            define({"type": "object", "properties": {"xs": {"type": "array", "maxItems": 1}}})
        )
        result = await runtime.root.call("t", {"xs": [1, [2, "3"]]})
        assert result.error is not None and result.error.code == "INVALID_ARGS"
        assert result.error.message == (
            'invalid arguments for `t`: $.xs: [1,[2,"3"]] has more than 1 item'
        )
        # DESIGN section 3: a direct call's arguments must be JSON; a tuple is not.
        result = await runtime.root.call("t", {"xs": (1,)})
        assert result.error is not None and result.error.code == "INVALID_ARGS"
        assert "tuple is not a JSON type" in result.error.message


# --- what a program may pass ----------------------------------------------------------------


@pytest.mark.anyio
async def test_a_program_passes_tuples_as_arrays_and_other_keys_to_an_open_tool() -> None:
    seen: list[Any] = []

    async def record(arguments: Any, context: ptc.ToolContext) -> Any:
        seen.append(arguments)
        return None

    open_schema = {"type": "object", "properties": {"ids": {"type": "array"}}}
    closed_schema = {**open_schema, "additionalProperties": False}
    async with ptc.ToolRuntime(
        backend=FakeBackend(), containment=ptc.Containment(require=frozenset()),
        default_mode="code",
    ) as runtime:  # fmt: skip
        runtime.register(echo_tool("tag", input_schema=open_schema, execute=record))
        runtime.register(echo_tool("strict", input_schema=closed_schema, execute=record))
        ok = await runtime.root.run_code(
            "tools.tag(ids=(1, (2, 3)), trace='t', **{'x-y': ({'k': (4,)},)})\n"
            "tools.strict(ids=(5,))"
        )
        refused = await runtime.root.run_code("tools.strict(ids=[], trace='t')")
    assert not ok.is_error, ok.error
    assert seen == [{"ids": [1, [2, 3]], "trace": "t", "x-y": [{"k": [4]}]}, {"ids": [5]}]
    assert refused.error is not None and "code run failed (preflight)" in refused.error.message
    assert "tools.strict() has no parameter 'trace'" in refused.error.message


# --- whatever the schema, a SchemaError or a validator that never raises ----------------------

_KEYS = st.sampled_from(
    ["type", "properties", "items", "prefixItems", "$ref", "$defs", "definitions", "$id",
     "$anchor", "$dynamicRef", "$dynamicAnchor", "allOf", "anyOf", "oneOf", "not", "if",
     "then", "else", "required", "enum", "const", "additionalProperties", "dependencies",
     "dependentSchemas", "minimum", "exclusiveMinimum", "pattern", "$schema", "default", "x"]
)  # fmt: skip
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(
        ["#", "#/$defs/a", "#/properties/x", "#a", "a.json", "http://127.0.0.1:9/", "string",
         "object", "dict", DRAFT_04, DRAFT_07, "^a", "a"]
    ),
)  # fmt: skip
_JSONISH = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


@given(schema=st.dictionaries(_KEYS, _JSONISH, max_size=5), value=_JSONISH)
@settings(max_examples=300, deadline=None)
def test_any_schema_is_a_schema_error_or_a_validator_that_never_raises(
    schema: dict[str, Any], value: Any
) -> None:
    try:
        validator = compile_schema(schema, "fuzz")
    except ptc.SchemaError as exc:
        # Each problem names where it is; past MAX_PROBLEMS, one line says how many more.
        named = [p for p in exc.problems if not re.fullmatch(r"\.\.\. and \d+ more", p)]
        assert named and all(p.startswith("fuzz") for p in named)
        return
    problems = validator.problems(freeze(value))
    assert all(isinstance(p, str) and p.startswith("$") for p in problems)
