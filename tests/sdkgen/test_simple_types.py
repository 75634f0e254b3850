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
from sdkgen._simple_types import simple_fragment
from sdkgen._singular import singular_name
from sdkgen._typegen import build_fragment

from .shapes import ENUM, ODD_KEYS, SCALAR, WORDS, assert_the_generators, nested, obj, objects, same

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
    {"type": "object"},
]  # fmt: skip


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
    "output",
    [{"type": "object"}, {"type": "object", "properties": {}, "required": []},
     {"type": "object", "description": "Any fields.", "additionalProperties": False}],
)  # fmt: skip
def test_an_object_output_that_declares_nothing_is_the_generators_empty_typeddict(
    output: dict[str, Any],
) -> None:
    # The generator writes "class POutput(TypedDict): pass", which the reduction makes a
    # mapping of JSON values (not dict[str, Any], the type of such an object as a field).
    fast = assert_the_generators(obj({"q": {"type": "string"}}), output)
    assert fast.definitions == ("POutput: TypeAlias = dict[str, JSON]\n",)


@pytest.mark.parametrize(
    "schema",
    [
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
