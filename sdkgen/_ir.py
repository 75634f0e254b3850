"""The intermediate form both the stub and the worker module are rendered from."""

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

    def binding(self) -> ToolBinding:
        params = tuple(
            ParamBinding(ident=p.ident, key=p.key, required=p.required) for p in self.params
        )
        return ToolBinding(
            name=self.name, ident=self.ident, params=params, extra=self.extra is not None
        )


def tool_ir(spec: ToolSpec, ident: str, fragment: TypeFragment) -> ToolIR:
    """Combine a spec, its identifier and its type fragment into the intermediate form."""
    schema = modern(spec.input_schema)  # constraints in their 2020-12 forms
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    idents = property_idents(key for key, _, _ in fragment.params)
    params = tuple(
        ParamIR(
            ident=idents[key],
            key=key,
            annotation=annotation,
            required=required,
            doc=param_doc(props.get(key)),
        )
        for key, annotation, required in fragment.params
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
        returns=fragment.returns,
        definitions=fragment.definitions,
        typing_names=fragment.typing_names,
        notes=fragment.notes,
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
