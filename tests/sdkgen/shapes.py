"""Schemas as tools write them, and the comparison the fast path's tests make: where
:func:`sdkgen._simple_types.simple_fragment` answers, its fragment is the generator's."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from sdkgen._fragment import TypeFragment
from sdkgen._simple_types import simple_fragment
from sdkgen._typegen import build_fragment

Schema = dict[str, Any]


def same(fast: TypeFragment, slow: TypeFragment) -> bool:
    """Equal, parameters compared by key (their order is the schema's, set by the IR)."""
    keyed = {p[0]: p for p in fast.params} == {p[0]: p for p in slow.params}
    rest = (fast.definitions, fast.type_names, fast.typing_names, fast.returns, fast.notes)
    return keyed and rest == (slow.definitions, slow.type_names, slow.typing_names,
                              slow.returns, slow.notes)  # fmt: skip


def assert_the_generators(schema: Schema, output: Any = None) -> TypeFragment:
    """The fast path answers, and its answer is the generator's."""
    fast = simple_fragment(schema, output, "P")
    assert fast is not None, json.dumps([schema, output])
    slow = build_fragment(schema, output, "P")
    assert same(fast, slow), (fast, slow)
    return fast


def obj(properties: Schema, **more: Any) -> Schema:
    return {"type": "object", "properties": properties, **more}


SCALAR = st.sampled_from(["string", "integer", "number", "boolean"]).map(lambda t: {"type": t})
ENUM = st.one_of(
    st.lists(st.text(max_size=6), min_size=1, max_size=4, unique=True),
    st.lists(st.integers(-5, 5), min_size=1, max_size=4, unique=True),
).map(lambda values: {"enum": values})
# Nested shapes as tools write them: the words include plurals (array items are named in
# the singular), names of builtins and keys the functional TypedDict form needs.
WORDS = st.sampled_from(
    ["items", "data", "children", "conditions", "addresses", "series", "people", "matrix",
     "status", "body", "params", "requestConfig", "field_of_law", "HTTPHeaders", "ID", "v2",
     "type", "format", "id", "str", "list", "input", "output", "filter", "query", "value"]
) | st.from_regex(r"[a-z][a-zA-Z0-9]{0,7}", fullmatch=True)  # fmt: skip
ODD_KEYS = st.sampled_from(["Content-Type", "from", "class", "9lives", "a b", "it's", "x.y"])
TEXT = st.text(max_size=24)
ANNOTATIONS: st.SearchStrategy[Schema] = st.fixed_dictionaries(
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
    # pydantic's Literal of one value
    st.sampled_from(
        [{"const": "on", "type": "string"}, {"const": 3, "type": "integer"}, {"const": "x"}]
    ),
    st.just({}),
    st.just({"type": "object"}),
    st.just({"type": "object", "properties": {}, "required": []}),
)


def with_constraints(schema: Schema, *, plain: bool = False) -> st.SearchStrategy[Schema]:
    """``schema`` with constraints that apply to its type (``plain``: none on an enum)."""
    kind = schema.get("type")
    options: dict[str, st.SearchStrategy[Any]] = (
        CONSTRAINTS.get(kind, {}) if isinstance(kind, str) else {}
    )
    if plain and {"enum", "const"} & set(schema):
        options = {}
    return st.fixed_dictionaries({}, optional=options).map(lambda c: {**c, **schema})


def nullable(choice: tuple[Schema, int, bool]) -> Schema:
    """``how``: 0 as it is, 1 ``"type": [T, "null"]``, 2 ``anyOf`` / 3 ``oneOf`` with null."""
    schema, how, null_first = choice
    kind = schema.get("type")
    if how == 1 and isinstance(kind, str):
        return {**schema, "type": ["null", kind] if null_first else [kind, "null"]}
    if how in (2, 3):
        members = [{"type": "null"}, schema] if null_first else [schema, {"type": "null"}]
        return {"anyOf" if how == 2 else "oneOf": members}
    return schema


def objects(
    inner: st.SearchStrategy[Schema], keys: st.SearchStrategy[str]
) -> st.SearchStrategy[Schema]:
    def make(parts: tuple[Schema, list[bool], Any, bool]) -> Schema:
        properties, flags, extra, typed = parts
        schema: Schema = {"properties": properties}
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


def nested(
    keys: st.SearchStrategy[str],
    leaf: st.SearchStrategy[Schema] = LEAF,
    *,
    plain: bool = False,
    max_leaves: int = 8,
) -> st.SearchStrategy[Schema]:
    """Values of properties: leaves in arrays, maps and objects, "or null", annotated.
    ``plain``: only what the fast path always writes when no two names clash (no array
    of objects, whose singular name may be a sibling's, no ``"type": [T, "null"]``, no
    constraint beside an enum)."""

    def extend(inner: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
        items = inner.filter(lambda item: "properties" not in item) if plain else inner
        return st.one_of(
            items.map(lambda item: {"type": "array", "items": item}),
            inner.filter(bool).map(lambda v: {"type": "object", "additionalProperties": v}),
            objects(inner, keys),
        )

    shapes = st.recursive(leaf, extend, max_leaves=max_leaves).flatmap(
        lambda shape: with_constraints(shape, plain=plain)
    )
    how = st.sampled_from([0, 0, 0, 2, 3] if plain else [0, 0, 0, 1, 2, 3])
    shapes = st.tuples(shapes, how, st.booleans()).map(nullable)
    return st.tuples(shapes, ANNOTATIONS).map(lambda pair: {**pair[1], **pair[0]})
