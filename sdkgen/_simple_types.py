"""The fragment of a tool whose schemas have the common shapes, made without the generator.

datamodel-code-generator costs 0.5-1 s on its first call in a process and tens of
milliseconds per tool after that; most real tools need little of what it does: their
parameters are strings, numbers, booleans, enums, lists and maps of those, objects of such
properties at any depth, and the models and enums under ``$defs`` they refer to (what
pydantic writes for a typed Python function, :mod:`sdkgen._simple_refs`), and their output
is any JSON or such a type. For those, :func:`simple_fragment` writes the module the
generator would write (the same TypedDicts and aliases under the same names, in the same
order, with the same fields, docstrings and ``closed`` flags) and reduces it exactly as the
generator's module is reduced (:func:`~sdkgen._typegen.fragment_from_tree`). Anything
else, or any doubt (a name the generator would number to make it unique, a key it would
rename, a recursive model), returns ``None`` and goes to the generator. Tests compare the
two on every BFCL sample tool, on typed Python tools and on generated schemas: where this
module answers, its answer is the generator's.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from typing import Any

from ._ast_parse import parse
from ._dialect import for_typing, is_any
from ._fragment import JSON_ALIAS, TypeFragment
from ._simple_refs import CONTAINERS, generator_order, local_definitions, referenced, upper_camel
from ._simple_vocab import (
    ANNOTATIONS,
    CONSTRAINTS,
    FORMATS,
    IMPORTS,
    KEY,
    MAX_DEPTH,
    MODEL_EXTRAS,
    NULL,
    OBJECT_KEYS,
    PLAIN_KEY,
    SCALARS,
    SHAPING,
    docstring,
    empty_typeddict,
    indent,
    literal,
)
from ._singular import singular_name
from ._type_ast import TYPING_OK
from ._typegen import fragment_from_tree

__all__ = ("simple_fragment",)


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
        root = module.part(schema, module.input_name)
        if root is None or set(root) & SHAPING:
            return None
        if module.model(root, module.input_name, 0, root=True) is None:
            return None
    if output is not None and not module.output(output, f"{prefix}Output"):
        return None
    if module.models or module.defined:
        tree = parse("\n".join(module.statements))
        if module.defined:  # the generator moves types after those they name
            body = generator_order(tree.body)
            if body is None:
                return None
            tree.body = body
        return fragment_from_tree(tree, schema, output, prefix, notes)
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
        self.defined = False
        """Whether a part declared definitions (``$defs``)."""
        self.refs: dict[str, str] = {}
        """The current part's definitions: ``{reference: type name}``."""
        self.params: list[tuple[str, str, bool]] = []
        """The root input's fields: ``(key, annotation, required)``."""
        self.typing: set[str] = set()
        """``Any`` and ``Literal`` once any annotation uses them."""
        # Lower-cased: a name that differs from another only in case is left to the
        # generator too (it may number either).
        self.taken = {f"{prefix}Input".lower(), f"{prefix}Output".lower()}

    def part(self, schema: Mapping[str, Any], root: str) -> Mapping[str, Any] | None:
        """Write the definitions of the part whose root type is ``root`` (first, as the
        generator does); ``schema`` without them, or ``None``."""
        definitions = local_definitions(schema, root)
        if definitions is None:
            return None
        self.refs = {ref: name for ref, (name, _) in definitions.items()}
        if not all(self.named(d, name, root=False) for name, d in definitions.values()):
            return None
        self.defined |= bool(definitions)
        return {k: v for k, v in schema.items() if k not in CONTAINERS}

    def output(self, schema: Mapping[str, Any], name: str) -> bool:
        root = self.part(schema, name)
        return root is not None and self.named(root, name, root=True)

    def named(self, schema: Mapping[str, Any], name: str, *, root: bool) -> bool:
        """Write the type ``name`` of a definition or of the output: a TypedDict for an
        object, an alias of the type of anything else."""
        if any(k in schema and type(schema[k]) is not str for k in ("description", "title")):
            return False
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and properties:
            if root and set(schema) & SHAPING:
                return False
            return self.model(schema, name, 0, root=root) is not None
        if not (root or self._reserve(name)) or "allOf" in schema:  # allOf: a subclass
            return False
        empty = empty_typeddict(schema, name)
        if empty is not None:  # an object that declares nothing (a map is an alias)
            self.models += 1
            self.statements.append(empty)
            return True
        # The generator names an item or value model after the alias inside it
        # (POutputPOutput, POutputPOutputItem).
        alias = self.type(schema, upper_camel(f"{name}_{name}"), 0)
        if alias is None or (root and alias == "Any"):
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
            or (not root and not set(schema) - MODEL_EXTRAS <= OBJECT_KEYS)
            or not (root or self._reserve(name))
        ):
            return None
        fields: list[tuple[str, str, str]] = []
        for key, value in properties.items():
            # The generator renames a leading "_", and may alias an import a key shadows.
            if not (type(key) is str and KEY.match(key)) or key[0] == "_" or key in IMPORTS:
                return None
            plain = PLAIN_KEY.match(key) is not None and not keyword.iskeyword(key)
            child = upper_camel(f"{name}_{key}") if plain else None
            annotation = self.type(value, child, depth + 1)
            if annotation is None:
                return None
            if name == self.input_name:
                self.params.append((key, annotation, key in required))
            if key not in required:
                annotation = f"NotRequired[{annotation}]"
            fields.append((key, annotation, docstring(value)))
        self.models += name != self.input_name
        closed = ", closed=True" if extra is False else ""
        if all(PLAIN_KEY.match(k) and not keyword.iskeyword(k) for k, _, _ in fields):
            body = "".join(f"    {k}: {a}\n{indent(doc)}" for k, a, doc in fields)
            head = f"class {name}(TypedDict{closed}):\n{indent(docstring(schema))}"
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
        if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
            return None
        if any(k in schema and type(schema[k]) is not str for k in ("description", "title")):
            return None
        keys = set(schema) - ANNOTATIONS
        if not keys:
            self.typing.add("Any")
            return "Any"
        if keys == {"$ref"} or keys == {"allOf"}:
            ref = referenced(schema)
            return self.refs.get(ref) if ref is not None else None
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
            if {"enum", "const"} & keys or (
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
        for word in ("enum", "const"):  # pydantic writes a Literal of one value as a const
            if word in schema:
                self.typing.add("Literal")
                values = schema[word] if word == "enum" else [schema[word]]
                return literal(values, kind) if keys <= {word, "type"} else None
        if not isinstance(kind, str):
            kind = "object" if kind is None and "properties" in keys else None
        elif "format" in keys and schema["format"] not in FORMATS.get(kind, ()):
            return None
        keys = keys - CONSTRAINTS.get(kind, frozenset()) if kind is not None else keys
        if kind in SCALARS:
            return SCALARS[kind] if keys == {"type"} else None
        if kind == "array" and keys <= {"type", "items"}:
            if "items" not in schema:
                self.typing.add("Any")
                return "list[Any]"
            items = self.type(schema["items"], name, depth + 1, item=True)
            return f"list[{items}]" if items is not None else None
        if kind == "object" and keys <= OBJECT_KEYS:
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
        if not isinstance(members, list) or len(members) != 2 or members.count(NULL) != 1:
            return None
        (other,) = (m for m in members if m != NULL)
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
