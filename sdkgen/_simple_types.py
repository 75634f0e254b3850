"""The fragment of a tool whose schemas are simple, made without the type generator.

datamodel-code-generator costs 0.5-1 s on its first call in a process and tens of
milliseconds per tool after that; most real tools (289 of the 300 BFCL sample definitions)
need none of what it does: their parameters are strings, numbers, booleans, enums and
lists or maps of those, and their output is any JSON or such a type. For those,
:func:`simple_fragment` writes the very fragment the generator would (the same annotations,
written by ``ast.unparse`` as the generator's are, the same ``<Prefix>Output`` alias), and
returns ``None`` for anything else, which then goes to the generator. A test compares the
two on every BFCL sample tool and on generated schemas: where this module answers, its
answer is the generator's.
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Mapping
from typing import Any

from ._dialect import for_typing, is_any
from ._fragment import JSON_ALIAS, TypeFragment

__all__ = ("simple_fragment",)

_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
# Keywords that only describe, or constrain without changing the generated type.
_INERT = frozenset(
    {"description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
     "writeOnly", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"}
)  # fmt: skip


def simple_fragment(
    input_schema: Mapping[str, Any], output_schema: object, prefix: str
) -> TypeFragment | None:
    """The generator's fragment for these schemas, or ``None`` when they are not simple."""
    notes: list[str] = []
    schema = for_typing(input_schema, notes, "input")
    if notes or not _plain_object(schema):
        return None
    params: list[tuple[str, str, bool]] = []
    required = schema.get("required", [])
    for key, prop in schema.get("properties", {}).items():
        if not _PLAIN_KEY.match(key) or keyword.iskeyword(key):
            return None  # the generator renames such fields (and maps them back)
        annotation = _annotation(prop)
        if annotation is None:
            return None
        params.append((key, annotation, key in required))
    definitions: tuple[str, ...] = ()
    type_names: tuple[str, ...] = ()
    returns = JSON_ALIAS
    used = [annotation for _, annotation, _ in params]
    if not (is_any(output_schema) or not isinstance(output_schema, Mapping)):
        output = for_typing(output_schema, notes, "output")
        alias = _annotation(output) if not notes else None
        if alias is None or alias == "Any":
            return None
        returns = f"{prefix}Output"
        definitions, type_names = (f"{returns}: TypeAlias = {alias}\n",), (returns,)
        used += [alias, "TypeAlias"]
    typing_names = sorted({n for a in used for n in _names(a)} & {"Any", "Literal", "TypeAlias"})
    return TypeFragment(
        definitions=definitions,
        type_names=type_names,
        typing_names=tuple(typing_names),
        params=tuple(params),
        returns=returns,
        notes=(),
    )


# Root keywords that shape the generated types (anything else at the root, such as a
# non-standard "optional" list, the generator ignores).
_SHAPING = frozenset(
    {"$ref", "$dynamicRef", "$recursiveRef", "$defs", "definitions", "allOf", "anyOf", "oneOf",
     "not", "if", "then", "else", "patternProperties", "unevaluatedProperties",
     "propertyNames", "dependentSchemas", "dependencies", "enum", "const", "items",
     "prefixItems", "nullable", "format", "$schema", "$id"}
)  # fmt: skip


def _plain_object(schema: Mapping[str, Any]) -> bool:
    if set(schema) & _SHAPING:
        return False
    props = schema.get("properties", {})
    required = schema.get("required", [])
    return (
        schema.get("type", "object") == "object"
        and isinstance(props, Mapping)
        and bool(props)
        and isinstance(required, list)
        and all(isinstance(k, str) and k in props for k in required)
        and schema.get("additionalProperties", True) in (True, False)
    )


def _annotation(schema: object, depth: int = 0) -> str | None:
    """``str``, ``list[int]``, ``Literal['a', 'b']``... for a simple schema, else ``None``."""
    if not isinstance(schema, Mapping) or depth > 3:
        return None
    keys = set(schema) - _INERT
    kind = schema.get("type")
    if not keys:
        return "Any"
    if "enum" in schema:
        return _literal(schema["enum"], kind) if keys <= {"enum", "type"} else None
    allowed = _CONTAINER_KEYS.get(kind, frozenset()) if isinstance(kind, str) else frozenset()
    if keys != {"type"} and not keys <= allowed:
        return None
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        if "items" not in schema:
            return "list[Any]"
        item = _annotation(schema["items"], depth + 1)
        return f"list[{item}]" if item is not None else None
    if kind == "object" and not schema.get("properties", {}) and "required" not in schema:
        extra = schema.get("additionalProperties")
        if extra is None:
            return "dict[str, Any]"
        value = _annotation(extra, depth + 1) if isinstance(extra, Mapping) and extra else None
        return f"dict[str, {value}]" if value is not None else None
    return None


_CONTAINER_KEYS = {
    "array": frozenset({"type", "items"}),
    "object": frozenset({"type", "additionalProperties", "properties"}),
}


def _literal(values: object, kind: object) -> str | None:
    if not isinstance(values, list) or not values or len(set(map(repr, values))) != len(values):
        return None
    if all(type(v) is str for v in values) and kind in (None, "string"):
        pass
    elif all(type(v) is int for v in values) and kind in (None, "integer"):
        pass
    else:
        return None
    elements: list[ast.expr] = [ast.Constant(value=v) for v in values]
    target: ast.expr = elements[0] if len(elements) == 1 else ast.Tuple(elts=elements)
    return ast.unparse(ast.Subscript(value=ast.Name(id="Literal"), slice=target))


def _names(annotation: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(annotation, mode="eval")) if isinstance(n, ast.Name)}
