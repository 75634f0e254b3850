"""The fragment of a tool whose schemas have the common shapes, made without the generator.

datamodel-code-generator costs 0.5-1 s on its first call in a process and tens of
milliseconds per tool after that; most real tools need little of what it does: their
parameters are strings, numbers, booleans, enums, lists and maps of those, and objects of
such properties at any depth (nested TypedDicts, arrays of objects), and their output is
any JSON or such a type. For those, :func:`simple_fragment` writes the module the generator
would write (the same TypedDicts under the same names, in the same order, with the same
fields, docstrings and ``closed`` flags, or the same ``<Prefix>Output`` alias) and reduces
it exactly as the generator's module is reduced (:func:`~sdkgen._typegen.fragment_from_tree`).
Anything else, or any doubt (a name the generator would number to make it unique, a key it
would rename), returns ``None`` and goes to the generator. A test compares the two on every
BFCL sample tool and on generated schemas: where this module answers, its answer is the
generator's.
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Mapping
from typing import Any

from ._dialect import for_typing, is_any
from ._fragment import JSON_ALIAS, TypeFragment
from ._singular import singular_name
from ._type_ast import TYPING_OK
from ._typegen import fragment_from_tree

__all__ = ("simple_fragment",)

# A key the generator keeps as a class field; any other key makes the TypedDict functional.
_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
# Keys written as they are in a functional TypedDict (the generator renames a leading "_").
_KEY = re.compile(r"[ -~]+\Z")
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
# Formats typed as their plain type (others, e.g. "binary" or "duration", are not).
_FORMATS = {
    "string": frozenset(
        {"date", "date-time", "time", "email", "idn-email", "hostname", "idn-hostname",
         "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "url", "uuid",
         "password", "byte", "regex", "json-pointer"}
    ),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}  # fmt: skip
# Keywords that only describe.
_ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "example", "$comment", "deprecated",
     "readOnly", "writeOnly", "optional"}
)  # fmt: skip
# Constraints that leave the generated type as it is, where they apply to the type (one
# that does not apply, such as a "pattern" on an array, can make the generator write an
# alias for the items).
_CONSTRAINTS = {
    "string": frozenset(
        {"minLength", "maxLength", "pattern", "format", "contentMediaType", "contentEncoding"}
    ),
    "integer": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"}
    ),
    "array": frozenset({"minItems", "maxItems", "uniqueItems"}),
    "object": frozenset({"minProperties", "maxProperties"}),
}
_CONSTRAINTS["number"] = _CONSTRAINTS["integer"]
_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties"})
_MODEL_EXTRAS = _ANNOTATIONS | _CONSTRAINTS["object"]
# Root keywords that shape the generated types (anything else at the root, such as a
# non-standard "optional" list, the generator ignores).
_SHAPING = frozenset(
    {"$ref", "$dynamicRef", "$recursiveRef", "$defs", "definitions", "allOf", "anyOf", "oneOf",
     "not", "if", "then", "else", "patternProperties", "unevaluatedProperties",
     "propertyNames", "dependentSchemas", "dependencies", "enum", "const", "items",
     "prefixItems", "nullable", "format", "$id"}
)  # fmt: skip
_NULL = {"type": "null"}
# What the generator's module imports (a key of that name may make it alias the import).
_IMPORTS = frozenset({"Any", "Literal", "NotRequired", "Required", "TypeAlias", "TypedDict"})
# Nesting beyond this is left to the generator (real tools stay far below it).
_MAX_DEPTH = 16


def simple_fragment(
    input_schema: Mapping[str, Any], output_schema: object, prefix: str
) -> TypeFragment | None:
    """The generator's fragment for these schemas, or ``None`` when they are not of a
    shape this module writes."""
    notes: list[str] = []
    schema = for_typing(input_schema, notes, "input")
    output = None
    if not (is_any(output_schema) or not isinstance(output_schema, Mapping)):
        output = for_typing(output_schema, notes, "output")
    if notes:
        return None
    module = _Module(prefix)
    # Without properties the input never reaches the generator (build_fragment).
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and properties:
        if set(schema) & _SHAPING or module.model(schema, module.input_name, 0, root=True) is None:
            return None
    if output is not None and not module.output(output, f"{prefix}Output"):
        return None
    if module.models:
        return fragment_from_tree(ast.parse(module.source()), schema, output, prefix, notes)
    # No TypedDict to place, open or name: the reduction's answer, without its cost.
    params = tuple(module.params)
    alias = f"{prefix}Output" if output is not None else None
    return TypeFragment(
        definitions=(module.statements[-1],) if alias else (),
        type_names=(alias,) if alias else (),
        typing_names=tuple(sorted(module.typing | ({"TypeAlias"} if alias else set()))),
        params=params,
        returns=alias or JSON_ALIAS,
        notes=(),
    )


class _Module:
    """The generator's module for one tool, statement by statement in its order (a
    model after the models its fields use)."""

    def __init__(self, prefix: str) -> None:
        self.input_name = f"{prefix}Input"
        self.statements: list[str] = []
        self.models = 0
        """TypedDicts written, the root input's aside."""
        self.params: list[tuple[str, str, bool]] = []
        """The root input's fields: ``(key, annotation, required)``."""
        self.typing: set[str] = set()
        """``Any`` and ``Literal`` once any annotation uses them."""
        # Lower-cased: a name that differs from another only in case is left to the
        # generator too (it may number either).
        self.taken = {f"{prefix}Input".lower(), f"{prefix}Output".lower()}

    def source(self) -> str:
        return "\n".join(self.statements)

    def output(self, schema: Mapping[str, Any], name: str) -> bool:
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and properties:
            return not set(schema) & _SHAPING and self.model(schema, name, 0, root=True) is not None
        # Anything else is an alias; the generator names an item or value model after
        # the alias inside it (POutputPOutput, POutputPOutputItem).
        alias = self.type(schema, _upper_camel(f"{name}_{name}"), 0)
        if alias is None or alias == "Any":
            return False
        self.statements.append(f"{name}: TypeAlias = {alias}\n")
        return True

    def model(self, schema: Mapping[str, Any], name: str, depth: int, *, root: bool) -> str | None:
        """Write the TypedDict ``name`` of an object schema with properties (after the
        models its fields use); ``None`` when it is not of a handled shape."""
        properties = schema.get("properties")
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", True)
        if (
            not isinstance(properties, Mapping)
            or not properties
            or schema.get("type", "object") != "object"
            or not (extra is True or extra is False)
            or not isinstance(required, list)
            or not all(type(k) is str and k in properties for k in required)
            or len(set(required)) != len(required)
            or (not root and not set(schema) - _MODEL_EXTRAS <= _OBJECT_KEYS)
            or not (root or self._reserve(name))
        ):
            return None
        fields: list[tuple[str, str, str]] = []
        for key, value in properties.items():
            # The generator renames a leading "_", and may alias an import a key shadows.
            if not (type(key) is str and _KEY.match(key)) or key[0] == "_" or key in _IMPORTS:
                return None
            plain = _PLAIN_KEY.match(key) is not None and not keyword.iskeyword(key)
            child = _upper_camel(f"{name}_{key}") if plain else None
            annotation = self.type(value, child, depth + 1)
            if annotation is None:
                return None
            if name == self.input_name:
                self.params.append((key, annotation, key in required))
            if key not in required:
                annotation = f"NotRequired[{annotation}]"
            fields.append((key, annotation, _docstring(value)))
        self.models += name != self.input_name
        closed = ", closed=True" if extra is False else ""
        if all(_PLAIN_KEY.match(k) and not keyword.iskeyword(k) for k, _, _ in fields):
            body = "".join(f"    {k}: {a}\n{_indent(doc)}" for k, a, doc in fields)
            head = f"class {name}(TypedDict{closed}):\n{_indent(_docstring(schema))}"
            self.statements.append(head + body)
        else:  # the functional form holds no docstrings
            items = ", ".join(f"{k!r}: {a}" for k, a, _ in fields)
            self.statements.append(f"{name} = TypedDict({name!r}, {{{items}}}{closed})\n")
        return name

    def type(
        self, schema: object, name: str | None, depth: int, *, item: bool = False
    ) -> str | None:
        """The annotation of ``schema``; an object with properties becomes the model
        ``name`` (made singular for an array's items, as the generator names them)."""
        if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
            return None
        if any(k in schema and type(schema[k]) is not str for k in ("description", "title")):
            return None
        keys = set(schema) - _ANNOTATIONS
        if not keys:
            self.typing.add("Any")
            return "Any"
        if keys == {"anyOf"} or keys == {"oneOf"}:
            return self._or_null(schema[keys.pop()], schema.get("description"), name, depth, item)
        kind = schema.get("type")
        if isinstance(kind, list):  # ["string", "null"]
            if len(kind) != 2 or kind.count("null") != 1:
                return None
            (kind,) = (k for k in kind if k != "null")
            # The generator reads an enum so as its values only, and an object without
            # properties but with other keywords as dict[str, Any] (with or without
            # "| None"): those are left to it.
            if "enum" in keys or (
                kind == "object" and not schema.get("properties") and keys != {"type"}
            ):
                return None
            typed = self._typed(schema, kind, keys, name, depth, item) if kind != "null" else None
            return f"{typed} | None" if typed is not None else None
        return self._typed(schema, kind, keys, name, depth, item)

    def _typed(
        self, schema: Mapping[str, Any], kind: object, keys: set[str], name: str | None,
        depth: int, item: bool,
    ) -> str | None:  # fmt: skip
        if "enum" in schema:
            self.typing.add("Literal")
            return _literal(schema["enum"], kind) if keys <= {"enum", "type"} else None
        if not isinstance(kind, str):
            kind = "object" if kind is None and "properties" in keys else None
        elif "format" in keys and schema["format"] not in _FORMATS.get(kind, ()):
            return None
        keys = keys - _CONSTRAINTS.get(kind, frozenset()) if kind is not None else keys
        if kind in _SCALARS:
            return _SCALARS[kind] if keys == {"type"} else None
        if kind == "array" and keys <= {"type", "items"}:
            if "items" not in schema:
                self.typing.add("Any")
                return "list[Any]"
            items = self.type(schema["items"], name, depth + 1, item=True)
            return f"list[{items}]" if items is not None else None
        if kind == "object" and keys <= _OBJECT_KEYS:
            properties = schema.get("properties", {})
            if not isinstance(properties, Mapping):
                return None
            if properties:
                if name is not None and item:
                    name = singular_name(name)
                return self.model(schema, name, depth, root=False) if name is not None else None
            if schema.get("required", []) != []:
                return None
            extra = schema.get("additionalProperties")
            if extra is None:
                self.typing.add("Any")
                return "dict[str, Any]"
            value = self.type(extra, name, depth + 1) if extra else None
            return f"dict[str, {value}]" if isinstance(extra, Mapping) and value else None
        return None

    def _or_null(
        self, members: object, description: object, name: str | None, depth: int, item: bool
    ) -> str | None:
        """``X | None`` for ``anyOf`` / ``oneOf`` of a schema and ``{"type": "null"}``
        (a model made of the schema takes the description around it if it has none)."""
        if not isinstance(members, list) or len(members) != 2 or members.count(_NULL) != 1:
            return None
        (other,) = (m for m in members if m != _NULL)
        if not isinstance(other, Mapping) or {"anyOf", "oneOf"} & set(other):
            return None
        if isinstance(other.get("type"), list):
            return None
        if "description" not in other and description is not None:
            other = {**other, "description": description}
        typed = self.type(other, name, depth + 1, item=item)
        return typed if typed in (None, "Any") else f"{typed} | None"

    def _reserve(self, name: str) -> bool:
        if not name.isidentifier() or name.lower() in self.taken or name in TYPING_OK:
            return False
        self.taken.add(name.lower())
        return True


def _upper_camel(name: str) -> str:
    """The generator's class name for ``<Parent>_<key>`` (a plain key)."""
    return "".join(part[0].upper() + part[1:] for part in name.split("_") if part)


def _docstring(schema: object) -> str:
    description = schema.get("description") if isinstance(schema, Mapping) else None
    return f"{description!r}\n" if isinstance(description, str) and description else ""


def _indent(line: str) -> str:
    return f"    {line}" if line else ""


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
