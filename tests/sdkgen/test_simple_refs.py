"""Local references on the fast path: the schemas pydantic writes for tools whose types are
models, TypedDicts, dataclasses and enums (``$defs`` and ``{"$ref": "#/$defs/Name"}``), and
generated schemas with definitions, get the generator's fragment without the generator;
recursive models and what the generator names or orders its own way are left to it."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sdkgen
from sdkgen._simple_types import simple_fragment
from sdkgen._typegen import build_fragment

from .shapes import (
    ANNOTATIONS,
    LEAF,
    WORDS,
    Schema,
    assert_the_generators,
    nested,
    obj,
    objects,
    same,
)
from .typed_tools import TOOLS, create_person, paint, plant, schemas, serve

# -- typed Python tools (typed_tools.py) -------------------------------------------------------


@pytest.mark.parametrize("function", TOOLS, ids=lambda f: f.__name__)
def test_the_schemas_of_typed_python_tools_get_the_generators_fragment(function: Any) -> None:
    input_schema, output_schema = schemas(function)
    assert "$defs" in input_schema or "$defs" in output_schema
    assert_the_generators(input_schema, output_schema)


def test_definitions_are_named_after_their_keys_and_shared_ones_written_per_part() -> None:
    fast = assert_the_generators(*schemas(create_person))
    assert fast.type_names == ("PInputAddress", "PInputColor", "PInputPerson",
                               "POutputAddress", "POutputColor", "POutput")  # fmt: skip
    assert fast.params == (("person", "PInputPerson", True),)  # closed: extra="forbid"
    assert fast.definitions[2] == (
        "class PInputPerson(TypedDict):\n"
        "    name: str\n"
        "    home: PInputAddress | dict[str, JSON]  # Where they live.\n"
        "    work: NotRequired[PInputAddress | dict[str, JSON] | None]\n"
        "    favourite: NotRequired[PInputColor]\n"
        "    tags: NotRequired[list[str]]\n"
        "    born: NotRequired[str | None]\n"
    )


def test_a_type_comes_after_the_types_it_names_as_the_generator_orders_them() -> None:
    # $defs are sorted by name: Box names Point, declared after it, so the generator moves
    # Box after every type that needs nothing unplaced, the output's included.
    paint_types = assert_the_generators(*schemas(paint)).type_names
    assert paint_types == ("PInputColor", "PInputPoint", "PInputPriority", "POutputColor",
                           "POutput", "PInputBox")  # fmt: skip
    ref = {"$ref": "#/$defs/Zed"}
    schema = obj({"ant": {"$ref": "#/$defs/Ant"}, "n": obj({"q": ref})}, **{"$defs": {
        "Ant": obj({"m": obj({"k": ref})}), "Zed": obj({"z": {"type": "string"}})}})  # fmt: skip
    fast = assert_the_generators(schema)
    assert fast.type_names == ("PInputZed", "PInputN", "PInputAntM", "PInputAnt")


def test_a_catalog_of_typed_python_tools_never_starts_the_generator(tmp_path: Path) -> None:
    specs = []
    for function in TOOLS:
        input_schema, output_schema = schemas(function)
        specs.append(sdkgen.ToolSpec(name=function.__name__, input_schema=input_schema,
                                     output_schema=output_schema))  # fmt: skip
    generator = sdkgen.SdkGenerator(tmp_path, out_of_process=True)
    try:
        sdk = generator.generate(specs)
        helper = generator._helper  # noqa: SLF001 - the test inspects its own generator
        assert helper is not None and not helper.running
    finally:
        generator.close()
    assert not any(tmp_path.iterdir()), "nothing was generated, so nothing was cached"
    assert "class CreatePersonInputPerson(TypedDict" in sdk.stub
    assert "typed as JSON" not in sdk.stub


# -- generated schemas with definitions --------------------------------------------------------

CONTAINERS = st.sampled_from(["$defs", "definitions"])
# Keys pydantic writes (a generic's "Page_Person_", a clash's "tests__models__Address"),
# ones the generator names its own way ("Model-1", "1abc") and any plain word.
DEF_KEYS = st.sampled_from(
    ["Address", "Person", "Page_Person_", "my_model", "tests__models__Address", "ID", "N",
     "_Private", "Items", "Input", "Output", "Model-1", "1abc", "a b", "Über"]
) | st.from_regex(r"_?[A-Za-z][A-Za-z0-9_]{0,6}", fullmatch=True)  # fmt: skip
# No type name the fast path writes can clash with another made of these: definitions end
# with a digit, keys are one letter (and arrays hold no objects, whose singular could be a
# sibling's name).
PLAIN_DEF_KEYS = st.from_regex(r"[A-Z][a-z]{1,5}[0-9]", fullmatch=True)
PLAIN_KEYS = st.sampled_from(string.ascii_lowercase)
# Keywords beside a reference that the generator reads (it inlines a constrained type).
SIBLINGS: st.SearchStrategy[Schema] = st.sampled_from(
    [{"minimum": 1}, {"type": "object"}, {"nullable": True}, {"properties": {"x": {}}}]
)


def references(keys: list[str], container: str, *, plain: bool) -> st.SearchStrategy[Schema]:
    """``{"$ref": ...}`` to one of ``keys``, annotated, or as ``allOf`` of that one."""
    ref: st.SearchStrategy[Schema] = st.sampled_from(keys).map(
        lambda key: {"$ref": f"#/{container}/{key}"}
    )
    forms = [ref, ref.map(lambda r: {"allOf": [r]})]
    if not plain:
        forms.append(st.tuples(ref, SIBLINGS).map(lambda pair: {**pair[0], **pair[1]}))
    return st.tuples(st.one_of(forms), ANNOTATIONS).map(lambda pair: {**pair[1], **pair[0]})


@st.composite
def with_definitions(draw: st.DrawFn, *, plain: bool, output: bool = False) -> Schema:
    """An input (or output) schema whose types use definitions. ``plain``: all of a shape
    the fast path writes (a definition only names later ones, so there is no cycle)."""
    keys = draw(st.lists(PLAIN_DEF_KEYS if plain else DEF_KEYS, min_size=1, max_size=3,
                         unique_by=str.lower if plain else None))  # fmt: skip
    container = draw(CONTAINERS)
    words = PLAIN_KEYS if plain else WORDS

    def values(targets: list[str]) -> st.SearchStrategy[Schema]:
        leaf = LEAF | references(targets, container, plain=plain) if targets else LEAF
        return nested(words, leaf, plain=plain, max_leaves=4)

    def top(targets: list[str]) -> st.SearchStrategy[Schema]:
        # An allOf at the top is a subclass, an object without properties an empty class.
        shapes = values(targets) | objects(values(targets), words)
        return shapes.filter(lambda s: "allOf" not in s) if plain else shapes

    definitions = {}
    for index, key in enumerate(keys):
        body = draw(top(keys[index + 1 :] if plain else keys))
        definitions[key] = {"title": key, **body} if draw(st.booleans()) else body
    root = draw(top(keys) if output else objects(values(keys), words))
    return {**root, container: definitions}


PLAIN_OUTPUTS = st.none() | with_definitions(plain=True, output=True).filter(
    lambda s: "properties" in s or "$ref" in s or "items" in s
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(with_definitions(plain=True), PLAIN_OUTPUTS)
def test_generated_schemas_with_definitions_get_the_generators_fragment(
    schema: Schema, output: Schema | None
) -> None:
    assert_the_generators(schema, output)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(with_definitions(plain=False), st.none() | with_definitions(plain=False, output=True))
def test_where_the_fast_path_answers_a_schema_with_definitions_it_is_the_generators(
    schema: Schema, output: Schema | None
) -> None:
    fast = simple_fragment(schema, output, "P")
    if fast is not None:
        assert same(fast, build_fragment(schema, output, "P"))


# -- what stays with the generator -------------------------------------------------------------


@pytest.mark.parametrize("function", [plant, serve], ids=lambda f: f.__name__)
def test_recursive_models_are_left_to_the_generator_which_types_them(function: Any) -> None:
    input_schema, output_schema = schemas(function)
    assert simple_fragment(input_schema, output_schema, "P") is None
    model = "Node" if function is plant else "Ping"
    slow = build_fragment(input_schema, output_schema, "P")
    assert slow.notes == () and slow.params[0][1] == f"PInput{model} | dict[str, JSON]"
    sdk = sdkgen.SdkGenerator().generate(
        [sdkgen.ToolSpec(name="t", input_schema=input_schema, output_schema=output_schema)]
    )
    assert f"Input{model}(TypedDict):" in sdk.stub


def test_a_schema_that_contains_itself_through_its_definitions_is_left_to_the_generator() -> None:
    for loop in ({"$ref": "#/$defs/A"}, {"type": "array", "items": {"$ref": "#/$defs/B"}}):
        definitions = {"A": obj({"next": loop}), "B": {"$ref": "#/$defs/A"}}
        assert simple_fragment(obj({"a": {"$ref": "#/$defs/A"}}, **{"$defs": definitions}),
                               None, "P") is None  # fmt: skip


STRING = {"type": "string"}
ADDRESS = {"Address": obj({"city": STRING})}


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (obj({"a": {"$ref": "#/$defs/Nope"}}, **{"$defs": ADDRESS}), "no such definition"),
        (obj({"a": {"$ref": "#/properties/b"}, "b": STRING}), "a pointer to a property"),
        (obj({"a": {"$ref": "#/$defs/Address/properties/city"}}, **{"$defs": ADDRESS}),
         "a pointer into a definition"),
        (obj({"a": {"$ref": "#/$defs/Address", "minLength": 1}}, **{"$defs": ADDRESS}),
         "a constraint beside a reference: the generator inlines the type"),
        (obj({"a": {"$ref": "#/$defs/Address", "type": "object"}}, **{"$defs": ADDRESS}),
         "a type beside a reference: the generator makes a model of its own"),
        (obj({"a": {"allOf": [{"$ref": "#/$defs/Address"}, {"required": ["city"]}]}},
             **{"$defs": ADDRESS}), "an allOf of more than the reference"),
        (obj({"a": {"$ref": "#/$defs/Model-1"}}, **{"$defs": {"Model-1": STRING}}),
         "a key the generator names its own way (Model1)"),
        (obj({"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/definitions/B"}},
             **{"$defs": {"A": STRING}, "definitions": {"B": STRING}}), "both containers"),
        (obj({"n": obj({"x": STRING}), "a": {"$ref": "#/$defs/N"}}, **{"$defs": {"N": STRING}}),
         "two types named PInputN: the generator numbers one"),
        (obj({"a": {"$ref": "#/$defs/A"}}, **{"$defs": {"A": STRING, "a": STRING}}),
         "two definitions named alike"),
        (obj({"a": {"$ref": "#/$defs/A"}}, **{"$defs": {"A": {"allOf": [{"$ref": "#/$defs/B"}]},
                                                        "B": obj({"x": STRING})}}),
         "a definition that is an allOf: a subclass"),
        (obj({"a": {"$ref": "#/$defs/A"}}, **{"$defs": {
            "A": obj({"x": STRING}, **{"$defs": {"B": STRING}})}}), "definitions inside one"),
        (obj({"a": {"$ref": "#/$defs/A"}}, **{"$defs": {"A": STRING, "U": {"anyOf": [
            STRING, {"type": "integer"}]}}}), "an unused definition it does not write"),
    ],
)  # fmt: skip
def test_references_the_generator_reads_its_own_way_are_left_to_it(
    schema: Schema, why: str
) -> None:
    assert simple_fragment(schema, None, "P") is None, why


def test_an_output_may_be_a_reference_but_an_allof_of_one_is_a_subclass() -> None:
    definitions = {"$defs": {"A": obj({"x": STRING})}}
    alias = assert_the_generators(obj({"q": STRING}), {"$ref": "#/$defs/A", **definitions})
    assert alias.definitions[-1] == "POutput: TypeAlias = POutputA\n"
    subclass = {"allOf": [{"$ref": "#/$defs/A"}], **definitions}  # class POutput(POutputA)
    assert simple_fragment(obj({"q": STRING}), subclass, "P") is None
