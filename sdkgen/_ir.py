"""The intermediate form both the stub and the worker module are rendered from.

A tool's parameters (keys, required, order) come from its input schema whenever the schema
lists them plainly (:func:`plain_params`); only their annotations need the tool's type
fragment. So the worker module and the bindings of a tool whose stub nobody reads (search
discovery: undescribed tools) are built without the type generator, and are the same
whether or not a fragment exists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._dialect import closed_object, modern
from ._fragment import TypeFragment
from ._idents import property_idents
from ._render_types import one_line
from ._types import ParamBinding, ToolBinding, ToolSpec

# Root keywords that can add or change parameters beyond a plain ``properties`` map: with
# any of them the type generator's reading (the fragment) is the truth.
_COMPOSED = (
    "$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "not", "if",
    "dependentSchemas", "dependencies",
)  # fmt: skip
UNTYPED = "JSON"
"""The annotation of a parameter whose fragment is not known (never shown in a stub)."""

# Constraints a type annotation cannot say, in the order they are listed.
_CONSTRAINTS = (
    "format", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems",
    "minProperties", "maxProperties",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ParamIR:
    ident: str
    key: str
    annotation: str
    required: bool
    doc: str
    """One line: description, default and constraints; empty when there is nothing to say."""


@dataclass(frozen=True, kw_only=True)
class ToolIR:
    name: str
    ident: str
    description: tuple[str, ...]
    params: tuple[ParamIR, ...]
    extra: str | None
    """The ``**`` parameter's name when the input accepts other keys, else ``None``."""
    returns: str
    definitions: tuple[str, ...]
    typing_names: tuple[str, ...]
    notes: tuple[str, ...]
    typed: bool
    """Annotations come from the tool's fragment (the stub may show this tool)."""

    def binding(self) -> ToolBinding:
        params = tuple(
            ParamBinding(ident=p.ident, key=p.key, required=p.required) for p in self.params
        )
        return ToolBinding(
            name=self.name, ident=self.ident, params=params, extra=self.extra is not None
        )


def plain_params(schema: Mapping[str, Any]) -> tuple[tuple[str, bool], ...] | None:
    """``(key, required)`` per property, in schema order, when the (modern) input schema
    states its parameters plainly: an object with a ``properties`` map and a ``required``
    list of some of those keys, composed with nothing. ``None`` otherwise (then only the
    type generator knows the parameters)."""
    if any(key in schema for key in _COMPOSED):
        return None
    if schema.get("type", "object") != "object":
        return None
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, Mapping) or not isinstance(required, list):
        return None
    if not all(isinstance(key, str) and key in props for key in required):
        return None
    return tuple((key, key in required) for key in props)


def needs_fragment(spec: ToolSpec) -> bool:
    """Whether the tool's parameters can only be read from its type fragment."""
    return plain_params(spec.input_schema) is None


def tool_ir(spec: ToolSpec, ident: str, fragment: TypeFragment | None) -> ToolIR:
    """Combine a spec, its identifier and its type fragment into the intermediate form.

    ``fragment`` may be ``None`` when :func:`needs_fragment` is false: the result is then
    untyped (enough for the worker module and the bindings, not for a stub: no
    annotations, no parameter docs). The parameters and openness are read from the
    schema's root, which older drafts spell the same way."""
    schema = spec.input_schema
    props: Mapping[str, Any] = {}
    if fragment is not None:
        modern_props = modern(schema).get("properties")  # constraints in 2020-12 forms
        props = modern_props if isinstance(modern_props, Mapping) else {}
    plain = plain_params(schema)
    annotations = {key: annotation for key, annotation, _ in fragment.params} if fragment else {}
    if plain is not None:
        listed = tuple((key, annotations.get(key, UNTYPED), req) for key, req in plain)
    elif fragment is not None:
        listed = fragment.params
    else:
        raise ValueError(f"tool {spec.name!r}: its parameters need its type fragment")
    idents = property_idents(key for key, _, _ in listed)
    params = tuple(
        ParamIR(
            ident=idents[key],
            key=key,
            annotation=annotation,
            required=required,
            doc=param_doc(props.get(key)),
        )
        for key, annotation, required in listed
    )
    # Required first keeps the signature readable; schema order within each group.
    params = tuple(p for p in params if p.required) + tuple(p for p in params if not p.required)
    extra = None
    if not closed_object(schema):
        taken = {p.ident for p in params}
        extra = "extra"
        while extra in taken:
            extra += "_"
    lines = [line.rstrip() for line in spec.description.strip().splitlines()]
    return ToolIR(
        name=spec.name,
        ident=ident,
        description=tuple(lines),
        params=params,
        extra=extra,
        returns=fragment.returns if fragment else UNTYPED,
        definitions=fragment.definitions if fragment else (),
        typing_names=fragment.typing_names if fragment else (),
        notes=fragment.notes if fragment else (),
        typed=fragment is not None,
    )


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def param_doc(schema: object) -> str:
    """``description (default: 10; minimum: 1)`` for one property schema."""
    if not isinstance(schema, Mapping):
        return ""
    description = schema.get("description")
    text = one_line(description) if isinstance(description, str) else ""
    facts = []
    if "default" in schema:
        facts.append(f"default: {_compact(schema['default'])}")
    facts.extend(f"{name}: {_compact(schema[name])}" for name in _CONSTRAINTS if name in schema)
    prefix = schema.get("prefixItems")
    if isinstance(prefix, list) and prefix:
        facts.append("items in order: " + ", ".join(_kind(item) for item in prefix))
    items = schema.get("items")
    if isinstance(items, Mapping):
        facts.extend(
            f"items {name}: {_compact(items[name])}" for name in _CONSTRAINTS if name in items
        )
    facts.extend(_enum_docs(schema))
    if facts:
        text = f"{text} ({'; '.join(facts)})" if text else "; ".join(facts)
    return text


def _kind(schema: object) -> str:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return _compact(kind) if kind is not None else "any"


def _enum_docs(schema: Mapping[str, Any]) -> list[str]:
    """Descriptions of enum members (``oneOf`` of described ``const``s, or the
    ``enumDescriptions`` extension) -- a ``Literal`` keeps the values only."""
    described = [
        f"{_compact(option['const'])}={one_line(str(option['description']))}"
        for option in schema.get("oneOf") or schema.get("anyOf") or ()
        if isinstance(option, Mapping) and "const" in option and option.get("description")
    ]
    enum, names = schema.get("enum"), schema.get("enumDescriptions")
    if isinstance(enum, list) and isinstance(names, list) and len(enum) == len(names):
        described.extend(
            f"{_compact(v)}={one_line(str(d))}" for v, d in zip(enum, names, strict=True)
        )
    return described
