"""What the fast path (:mod:`sdkgen._simple_types`) reads in a schema, and how it writes
what it reads: the keywords that only describe, the constraints that leave a type as it
is, the formats typed as their plain type, the keys the generator keeps as they are, and
an enum as a ``Literal``, a description as a docstring."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

__all__ = (
    "ANNOTATIONS",
    "CONSTRAINTS",
    "FORMATS",
    "IMPORTS",
    "KEY",
    "MAX_DEPTH",
    "MODEL_EXTRAS",
    "NULL",
    "OBJECT_KEYS",
    "PLAIN_KEY",
    "SCALARS",
    "SHAPING",
    "docstring",
    "empty_typeddict",
    "indent",
    "literal",
)

# A key the generator keeps as a class field; any other key makes the TypedDict functional.
PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
# Keys written as they are in a functional TypedDict (the generator renames a leading "_").
KEY = re.compile(r"[ -~]+\Z")
SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
# Formats typed as their plain type (others, e.g. "binary" or "duration", are not).
FORMATS = {
    "string": frozenset(
        {"date", "date-time", "time", "email", "idn-email", "hostname", "idn-hostname",
         "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "url", "uuid",
         "password", "byte", "regex", "json-pointer"}
    ),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}  # fmt: skip
# Keywords that only describe.
ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "example", "$comment", "deprecated",
     "readOnly", "writeOnly", "optional"}
)  # fmt: skip
# Constraints that leave the generated type as it is, where they apply to the type (one
# that does not apply, such as a "pattern" on an array, can make the generator write an
# alias for the items).
CONSTRAINTS = {
    "string": frozenset(
        {"minLength", "maxLength", "pattern", "format", "contentMediaType", "contentEncoding"}
    ),
    "integer": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"}
    ),
    "array": frozenset({"minItems", "maxItems", "uniqueItems"}),
    "object": frozenset({"minProperties", "maxProperties"}),
}
CONSTRAINTS["number"] = CONSTRAINTS["integer"]
OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties"})
MODEL_EXTRAS = ANNOTATIONS | CONSTRAINTS["object"]
# Root keywords that shape the generated types (anything else at the root, such as a
# non-standard "optional" list, the generator ignores).
SHAPING = frozenset(
    {"$ref", "$dynamicRef", "$recursiveRef", "$defs", "definitions", "allOf", "anyOf", "oneOf",
     "not", "if", "then", "else", "patternProperties", "unevaluatedProperties",
     "propertyNames", "dependentSchemas", "dependencies", "enum", "const", "items",
     "prefixItems", "nullable", "format", "$id"}
)  # fmt: skip
NULL = {"type": "null"}
# What the generator's module imports (a key of that name may make it alias the import).
IMPORTS = frozenset({"Any", "Literal", "NotRequired", "Required", "TypeAlias", "TypedDict"})
# Nesting beyond this is left to the generator (real tools stay far below it).
MAX_DEPTH = 16


def docstring(schema: object) -> str:
    description = schema.get("description") if isinstance(schema, Mapping) else None
    return f"{description!r}\n" if isinstance(description, str) and description else ""


def indent(line: str) -> str:
    return f"    {line}" if line else ""


def literal(values: object, kind: object) -> str | None:
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


def empty_typeddict(schema: Mapping[str, Any], name: str) -> str | None:
    """The TypedDict the generator writes for a named object that declares nothing
    (``{"type": "object"}``), which the reduction makes a mapping; ``None`` for others."""
    extra = schema.get("additionalProperties", True)
    if (
        schema.get("type") != "object"
        or not set(schema) - ANNOTATIONS <= OBJECT_KEYS
        or schema.get("properties", {}) != {}
        or schema.get("required", []) != []
        or not (extra is True or extra is False)
    ):
        return None
    closed = ", closed=True" if extra is False else ""
    body = indent(docstring(schema)) or "    pass\n"
    return f"class {name}(TypedDict{closed}):\n{body}"
