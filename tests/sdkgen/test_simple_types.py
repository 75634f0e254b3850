"""The common shapes get their fragment without the type generator: wherever
:func:`sdkgen._simple_types.simple_fragment` answers, its answer is the generator's
(compared on every BFCL sample definition, on generated flat and nested schemas and on the
shapes below), and a catalog of such tools never starts the generator or its helper."""

from __future__ import annotations

import json
import keyword
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sdkgen
from sdkgen._fragment import TypeFragment
from sdkgen._simple_types import simple_fragment
from sdkgen._singular import singular_name
from sdkgen._typegen import build_fragment

SAMPLE = Path(__file__).parent.parent / "ptc" / "data" / "bfcl_sample.jsonl"
OUTPUTS: list[Any] = [
    None,
    {},
    {"type": "string"},
    {"type": "array", "items": {"type": "integer"}},
    {"type": "object", "additionalProperties": {"type": "number"}, "title": "Out"},
    {"type": "object", "description": "A page.", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["id"]}},
        "next": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
    {"type": "array", "items": {"type": "object", "properties": {"url": {"type": "string"}}}},
]  # fmt: skip


def same(fast: TypeFragment, slow: TypeFragment) -> bool:
    """Equal, parameters compared by key (their order is the schema's, set by the IR)."""
    keyed = {p[0]: p for p in fast.params} == {p[0]: p for p in slow.params}
    rest = (fast.definitions, fast.type_names, fast.typing_names, fast.returns, fast.notes)
    return keyed and rest == (slow.definitions, slow.type_names, slow.typing_names,
                              slow.returns, slow.notes)  # fmt: skip


def assert_the_generators(schema: dict[str, Any], output: Any = None) -> TypeFragment:
    fast = simple_fragment(schema, output, "P")
    assert fast is not None, json.dumps(schema)
    slow = build_fragment(schema, output, "P")
    assert same(fast, slow), (fast, slow)
    return fast


def sample() -> list[dict[str, Any]]:
    import ptc  # the sample's schemas are made standard first, as ptc does at definition

    schemas = []
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip():
            function = json.loads(line)["function"]
            schemas.append(ptc.lenient_schema(function.get("parameters") or {})[0])
    return schemas


@pytest.mark.slow
def test_on_the_bfcl_sample_the_fast_path_is_the_generator() -> None:
    for index, schema in enumerate(sample()):
        assert_the_generators(schema, OUTPUTS[index % len(OUTPUTS)])


@pytest.mark.slow
def test_a_catalog_of_the_bfcl_sample_never_starts_the_generator(tmp_path: Path) -> None:
    specs = {}
    for index, schema in enumerate(sample()):
        name = f"t{index}"
        specs[name] = sdkgen.ToolSpec(name=name, input_schema=schema, output_schema=OUTPUTS[2])
    generator = sdkgen.SdkGenerator(tmp_path, out_of_process=True)
    try:
        sdk = generator.generate(list(specs.values()))
        helper = generator._helper  # noqa: SLF001 - the test inspects its own generator
        assert helper is not None and not helper.running
    finally:
        generator.close()
    assert not any(tmp_path.iterdir()), "nothing was generated, so nothing was cached"
    assert len(sdk.tools) == len(specs) and "typed as JSON" not in sdk.stub


# -- generated schemas ------------------------------------------------------------------------

INERT = st.fixed_dictionaries(
    {}, optional={"description": st.text(max_size=10), "title": st.just("T"),
                  "default": st.none() | st.integers()}
)  # fmt: skip
SCALAR = st.sampled_from(["string", "integer", "number", "boolean"]).map(lambda t: {"type": t})
ENUM = st.one_of(
    st.lists(st.text(max_size=6), min_size=1, max_size=4, unique=True),
    st.lists(st.integers(-5, 5), min_size=1, max_size=4, unique=True),
).map(lambda values: {"enum": values})
SIMPLE = st.recursive(
    st.one_of(SCALAR, ENUM, st.just({})),
    lambda inner: st.one_of(
        inner.map(lambda item: {"type": "array", "items": item}),
        st.just({"type": "array"}),
        st.just({"type": "object"}),
        inner.filter(bool).map(lambda v: {"type": "object", "additionalProperties": v}),
    ),
    max_leaves=3,
)
PROPERTY = st.tuples(SIMPLE, INERT).map(lambda pair: {**pair[1], **pair[0]})
KEYS = st.from_regex(r"[a-z][a-z_]{0,5}", fullmatch=True).filter(
    lambda key: not keyword.iskeyword(key)
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, PROPERTY, min_size=1, max_size=4), st.data())
def test_generated_simple_schemas_get_the_generators_fragment(
    properties: dict[str, Any], draw: st.DataObject
) -> None:
    required = draw.draw(st.lists(st.sampled_from(sorted(properties)), unique=True))
    schema = {"type": "object", "properties": properties, "required": required}
    assert_the_generators(schema, draw.draw(st.sampled_from(OUTPUTS)))


# Nested shapes as tools write them: the words include plurals (array items are named in
# the singular), names of builtins and keys the functional TypedDict form needs.
WORDS = st.sampled_from(
    ["items", "data", "children", "conditions", "addresses", "series", "people", "matrix",
     "status", "body", "params", "requestConfig", "field_of_law", "HTTPHeaders", "ID", "v2",
     "type", "format", "id", "str", "list", "input", "output", "filter", "query", "value"]
) | st.from_regex(r"[a-z][a-zA-Z0-9]{0,7}", fullmatch=True)  # fmt: skip
ODD_KEYS = st.sampled_from(["Content-Type", "from", "class", "9lives", "a b", "it's", "x.y"])
TEXT = st.text(max_size=24)
ANNOTATIONS: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {}, optional={"description": TEXT, "title": st.just("T"), "examples": st.just([1]),
                  "default": st.none() | st.integers() | st.just({}), "$comment": TEXT,
                  "optional": st.booleans(), "deprecated": st.booleans(),
                  "readOnly": st.booleans()}
)  # fmt: skip
CONSTRAINTS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "string": {"pattern": st.just("^a"), "minLength": st.just(1),
               "format": st.sampled_from(["date", "date-time", "uri", "email", "uuid"])},
    "integer": {"minimum": st.just(0), "multipleOf": st.just(2), "format": st.just("int64")},
    "number": {"exclusiveMaximum": st.just(9), "format": st.just("double")},
    "array": {"uniqueItems": st.booleans(), "minItems": st.just(0), "maxItems": st.just(9)},
    "object": {"minProperties": st.just(1)},
}  # fmt: skip
LEAF = st.one_of(
    SCALAR,
    st.lists(st.text(max_size=5), min_size=1, max_size=3, unique=True).map(
        lambda values: {"enum": values, "type": "string"}
    ),
    ENUM,
    st.just({}),
    st.just({"type": "object"}),
    st.just({"type": "object", "properties": {}, "required": []}),
)


def with_constraints(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    kind = schema.get("type")
    options: dict[str, st.SearchStrategy[Any]] = (
        CONSTRAINTS.get(kind, {}) if isinstance(kind, str) else {}
    )
    return st.fixed_dictionaries({}, optional=options).map(lambda c: {**c, **schema})


def nullable(choice: tuple[dict[str, Any], int, bool]) -> dict[str, Any]:
    schema, how, null_first = choice
    kind = schema.get("type")
    if how == 1 and isinstance(kind, str):
        return {**schema, "type": ["null", kind] if null_first else [kind, "null"]}
    if how in (2, 3):
        members = [{"type": "null"}, schema] if null_first else [schema, {"type": "null"}]
        return {"anyOf" if how == 2 else "oneOf": members}
    return schema


def objects(
    inner: st.SearchStrategy[dict[str, Any]], keys: st.SearchStrategy[str]
) -> st.SearchStrategy[dict[str, Any]]:
    def make(parts: tuple[dict[str, Any], list[bool], Any, bool]) -> dict[str, Any]:
        properties, flags, extra, typed = parts
        schema: dict[str, Any] = {"properties": properties}
        if typed:
            schema["type"] = "object"
        schema["required"] = [k for k, flag in zip(properties, flags, strict=False) if flag]
        if extra is not None:
            schema["additionalProperties"] = extra
        return schema

    return st.tuples(
        st.dictionaries(keys, inner, min_size=1, max_size=4),
        st.lists(st.booleans(), min_size=4, max_size=4),
        st.sampled_from([None, True, False]),
        st.booleans(),
    ).map(make)


def nested(keys: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    def extend(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        return st.one_of(
            inner.map(lambda item: {"type": "array", "items": item}),
            inner.filter(bool).map(lambda v: {"type": "object", "additionalProperties": v}),
            objects(inner, keys),
        )

    shapes = st.recursive(LEAF, extend, max_leaves=8).flatmap(with_constraints)
    shapes = st.tuples(shapes, st.sampled_from([0, 0, 0, 1, 2, 3]), st.booleans()).map(nullable)
    return st.tuples(shapes, ANNOTATIONS).map(lambda pair: {**pair[1], **pair[0]})


NESTED = nested(WORDS)
NESTED_OUTPUTS = st.one_of(st.just(None), NESTED, objects(NESTED, WORDS))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(objects(NESTED, WORDS), NESTED_OUTPUTS)
def test_nested_schemas_get_the_generators_fragment(
    schema: dict[str, Any], output: dict[str, Any] | None
) -> None:
    fast = simple_fragment(schema, output, "P")
    # Two paths can make names that differ only in case ("ab" > "c" and "a" > "bC"): the
    # generator numbers one of them, so those are left to it; so are maps typed "or null".
    assume(fast is not None)
    assert fast is not None and same(fast, build_fragment(schema, output, "P"))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(objects(nested(WORDS | ODD_KEYS), WORDS | ODD_KEYS), NESTED_OUTPUTS, st.booleans())
def test_where_the_fast_path_answers_any_schema_it_is_the_generators_answer(
    schema: dict[str, Any], output: dict[str, Any] | None, draft_07: bool
) -> None:
    if draft_07:  # as zod-to-json-schema writes them
        schema = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
    fast = simple_fragment(schema, output, "P")
    if fast is not None:
        assert same(fast, build_fragment(schema, output, "P"))


# -- the shapes, one by one -------------------------------------------------------------------


def obj(properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **more}


def test_a_nested_object_is_a_typeddict_named_after_its_parents() -> None:
    fast = assert_the_generators(obj({"request_config": obj(
        {"method": {"enum": ["GET", "POST"]}, "headers": obj({"Accept": {"type": "string"}})},
        required=["method"], description="How to send it.")}))  # fmt: skip
    assert fast.type_names == ("PInputRequestConfigHeaders", "PInputRequestConfig")
    assert fast.definitions[1] == (
        "class PInputRequestConfig(TypedDict):\n"
        '    """How to send it."""\n'
        "    method: Literal['GET', 'POST']\n"
        "    headers: NotRequired[PInputRequestConfigHeaders | dict[str, JSON]]\n"
    )
    assert fast.params == (("request_config", "PInputRequestConfig | dict[str, JSON]", False),)


@pytest.mark.parametrize(
    ("key", "item"),
    [("conditions", "PInputCondition"), ("data", "PInputDatum"), ("addresses", "PInputAddress"),
     ("children", "PInputChildrenItem"), ("matrix", "PInputMatrixItem")],
)  # fmt: skip
def test_array_items_are_named_in_the_singular_as_the_generator_names_them(
    key: str, item: str
) -> None:
    schema = obj({key: {"type": "array", "items": obj({"x": {"type": "integer"}},
                                                       additionalProperties=False)}})  # fmt: skip
    fast = assert_the_generators(schema)
    assert fast.type_names == (item,) and fast.params == ((key, f"list[{item}]", False),)


def test_keys_that_are_no_identifiers_make_the_functional_form() -> None:
    fast = assert_the_generators(
        obj({"headers": obj({"Content-Type": {"type": "string"}, "from": {"type": "integer"}})})
    )
    assert fast.definitions == (
        "PInputHeaders = TypedDict('PInputHeaders', {\n"
        "    'Content-Type': NotRequired[str],\n"
        "    'from': NotRequired[int],\n"
        "})\n",
    )


@pytest.mark.parametrize(
    "null",
    [{"anyOf": [{"type": "string"}, {"type": "null"}]},
     {"oneOf": [{"type": "null"}, {"type": "string"}]}, {"type": ["string", "null"]}],
)  # fmt: skip
def test_a_value_or_null_is_optional(null: dict[str, Any]) -> None:
    fast = assert_the_generators(obj({"cursor": {**null, "default": None}}))
    assert fast.params == (("cursor", "str | None", False),)


def test_an_object_output_is_a_typeddict_and_an_array_of_them_an_alias() -> None:
    page = assert_the_generators(obj({"q": {"type": "string"}}), OUTPUTS[5])
    assert page.returns == "POutput" and page.type_names == ("POutputItem", "POutput")
    rows = assert_the_generators(obj({"q": {"type": "string"}}), OUTPUTS[6])
    assert rows.definitions[-1] == "POutput: TypeAlias = list[POutputPOutputItem]\n"


@pytest.mark.parametrize(
    "schema",
    [
        obj({"a": {"$ref": "#/$defs/x"}}, **{"$defs": {"x": {}}}),
        obj({"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}),
        obj({"a": {"enum": ["x", None]}}),
        obj({"a": {"type": "string", "format": "binary"}}),  # bytes
        obj({"a": {"type": "string", "format": "duration"}}),  # timedelta: typed as JSON
        obj({"a": {"type": "array", "items": {"type": "string"}, "pattern": "^a"}}),
        obj({"_private": {"type": "string"}}),  # renamed to field_private
        obj({"Any": {}}),  # the generator aliases its import
        obj({"a_b": obj({"x": {}}), "aB": obj({"y": {}})}),  # both PInputAB: one is numbered
        obj({"Content-Type": obj({"x": {}})}),  # a model under a key that is no identifier
        obj({"a": {"type": ["object", "null"], "additionalProperties": {"type": "string"}}}),
        obj({"a": {"type": ["object", "null"], "properties": {}}}),  # dict[str, Any], no None
        obj({"a": {"type": ["string", "null"], "enum": ["x"]}}),  # Literal['x'], no None
        obj({"a": obj({"x": {}}, additionalProperties={"type": "string"})}),
        obj({"a": obj({"x": {}}, required=["y"])}),
        obj({"a": {"type": "object", "properties": {}, "required": ["y"]}}),
        obj({"a": {"type": "string"}}, anyOf=[{"required": ["a"]}]),
    ],
)
def test_what_the_fast_path_does_not_write_goes_to_the_generator(schema: dict[str, Any]) -> None:
    assert simple_fragment(schema, None, "P") is None


def test_a_constraint_without_a_type_goes_to_the_generator() -> None:
    assert simple_fragment(obj({"a": {}}), {"minimum": 1}, "P") is None


# -- singular names ---------------------------------------------------------------------------


def test_singular_names_are_the_generators() -> None:
    from datamodel_code_generator.reference import get_singular_name

    words = ["Conditions", "Data", "Children", "Series", "People", "Quizzes", "Indices",
             "Analyses", "POutput", "Matrix", "Status", "Boxes", "News", "Criteria", "Leaves",
             "Items", "IDs", "V2"]  # fmt: skip
    for word in (("POutput" if w == "POutput" else "PInput") + w for w in words):
        assert singular_name(word) == get_singular_name(word), word


def test_singular_names_load_no_typeguard_and_leave_the_public_modules_alone() -> None:
    code = (
        "import sys\n"
        "from sdkgen._simple_types import simple_fragment\n"
        "f = simple_fragment({'type': 'object', 'properties': {'rows': {'type': 'array',"
        " 'items': {'type': 'object', 'properties': {'x': {}}}}}}, None, 'P')\n"
        "print(f.type_names, sorted(m for m in ('inflect', 'typeguard', 'datamodel_code_generator')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "('PInputRow',) []"


def test_without_inflect_arrays_of_objects_go_to_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sdkgen import _singular

    monkeypatch.setattr(_singular, "_engine", None)
    monkeypatch.setattr(_singular, "_unavailable", True)
    _singular.singular_name.cache_clear()
    try:
        rows = obj({"rows": {"type": "array", "items": obj({"x": {}})}})
        assert simple_fragment(rows, None, "P") is None
        assert simple_fragment(obj({"row": obj({"x": {}})}), None, "P") is not None
    finally:
        _singular.singular_name.cache_clear()
