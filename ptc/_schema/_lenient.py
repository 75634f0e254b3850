"""``ptc.lenient_schema``: schemas from the wild rewritten to standard JSON Schema.

Function-calling data sets and some servers write types the way their language names them
(``dict``, ``float``, ``tuple``, ``any``, ``String``, ``HashMap``, ``ArrayList``,
``Integer``, ``long``, ``""``) and mix in forms of other drafts or of OpenAPI. Each rewrite
below keeps what the author evidently meant and adds a note naming the path:

========================================  ==============================================
non-standard                              standard
========================================  ==============================================
``"type": "dict"`` / ``"HashMap"`` ...    ``"object"`` (likewise array, number, integer,
                                          string, boolean, null: see ``intended_type``)
``"type": "set"`` / ``"HashSet"``         ``"array"`` + ``"uniqueItems": true``
``"type": "List<String>"`` / ``String[]`` ``"array"`` + ``"items": {"type": "string"}``
``"type": "Map<String, Integer>"``        ``"object"`` + ``"additionalProperties"``
``"type": "any"`` / ``""`` / unknown      no ``type`` (any value)
``"nullable": true`` (OpenAPI 3.0)        ``null`` added to ``type`` (and ``enum``)
``"required": true`` on a property        the name added to the parent's ``required``
``"optional": true`` on a required one    the name removed from the parent's ``required``
``"required": "a"`` / repeated names      ``["a"]`` / each name once
``"enum": "a"``                           ``["a"]``
``"properties": {"a": "string"}``         ``{"a": {"type": "string"}}``
``"items": [...]`` (2020-12)              ``"prefixItems": [...]`` (+ ``additionalItems``
                                          -> ``items``)
``"exclusiveMinimum": true`` (not 04)     the numeric form
an unknown ``$schema``                    removed (read as 2020-12)
a tuple anywhere                          a list
========================================  ==============================================

Forms valid in the declared dialect are kept (a draft-07 schema keeps ``items: [...]``).
What cannot be rewritten (a ``$ref`` that leaves the schema, ``"minimum": "zero"``) is kept
as it is; :func:`ptc.define_tool` reports it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .._errors import SchemaError
from .._json import JSON
from ._checks import MAX_SCHEMA_DEPTH, Path, dialect_of, format_path, size_problem
from ._type_names import ANY, SET_NAMES, STANDARD_TYPES, intended_type

__all__ = ("lenient_schema",)

_GENERIC = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*<(.*)>\s*$")
_ARRAY_OF = re.compile(r"^\s*(.+?)\s*\[\s*\]\s*$")
# Keywords whose value is one subschema / a list of them / a map of them.
_ONE = (
    "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "contains",
    "propertyNames", "not", "if", "then", "else", "items", "additionalItems",
)  # fmt: skip
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = (
    "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies",
)  # fmt: skip


def lenient_schema(schema: Mapping[str, Any]) -> tuple[dict[str, JSON], tuple[str, ...]]:
    """Return ``(standard_schema, notes)``: a rewritten copy of ``schema`` and one note per
    change, each starting with the JSON path it applies to (``$.properties.a.type: "float"
    -> "number"``). ``schema`` itself is not changed; a schema that needs no rewrite comes
    back equal, with no notes. Raises :class:`ptc.SchemaError` when ``schema`` is not an
    object, is larger or is nested deeper than ptc accepts (checked before any rewrite: a
    rewrite never makes a schema acceptable that is too large)."""
    if not isinstance(schema, Mapping):
        raise SchemaError([f"$: a JSON Schema must be an object, got {type(schema).__name__}"])
    if (too_large := size_problem(schema)) is not None:
        raise SchemaError([f"${format_path(too_large[0])}: {too_large[1]}"])
    rewriter = _Rewriter()
    copy = rewriter.plain(schema, ())
    assert isinstance(copy, dict)
    dialect, unknown = dialect_of(copy)
    if unknown is not None:
        rewriter.note(("$schema",), f"unknown dialect {_j(copy.pop('$schema'))} removed (2020-12)")
    rewriter.dialect = dialect
    rewriter.schema(copy, ())
    return copy, tuple(rewriter.notes)


class _Rewriter:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.dialect = "2020-12"

    def note(self, path: Path, text: str) -> None:
        self.notes.append(f"${format_path(path)}: {text}")

    def plain(self, node: object, path: Path) -> object:
        """A deep copy with tuples as lists; bounded by the schema depth limit."""
        if isinstance(node, Mapping | list | tuple) and len(path) >= MAX_SCHEMA_DEPTH:
            raise SchemaError([f"$: nested deeper than {MAX_SCHEMA_DEPTH} levels (the limit)"])
        if isinstance(node, Mapping):
            return {k: self.plain(v, (*path, k)) for k, v in node.items()}
        if isinstance(node, tuple):
            self.note(path, "a tuple -> a list")
        if isinstance(node, list | tuple):
            return [self.plain(v, (*path, i)) for i, v in enumerate(node)]
        return node

    # -- one subschema -------------------------------------------------------------------

    def schema(self, node: object, path: Path) -> None:
        if not isinstance(node, dict):
            return
        self._type(node, path)
        self._nullable(node, path)
        self._required(node, path)
        self._enum(node, path)
        self._draft_forms(node, path)
        for key in _MAP:
            members = node.get(key)
            if isinstance(members, dict):
                for name, sub in list(members.items()):
                    if key == "properties" and isinstance(sub, str):
                        members[name] = sub = self._shorthand(sub, (*path, key, name))
                    self.schema(sub, (*path, key, name))
        for key in _MANY:
            items = node.get(key)
            if isinstance(items, list):
                for i, sub in enumerate(items):
                    self.schema(sub, (*path, key, i))
        for key in _ONE:
            sub = node.get(key)
            if isinstance(sub, list):  # draft-07 items
                for i, item in enumerate(sub):
                    self.schema(item, (*path, key, i))
            else:
                self.schema(sub, (*path, key))
        self._property_flags(node, path)

    def _type(self, node: dict[str, Any], path: Path) -> None:
        declared = node.get("type")
        if declared is None:
            return
        here = (*path, "type")
        names = declared if isinstance(declared, list) else [declared]
        if all(isinstance(n, str) and n in STANDARD_TYPES for n in names):
            if isinstance(declared, list) and len(set(declared)) != len(declared):
                node["type"] = list(dict.fromkeys(declared))
                self.note(here, f"{_j(declared)} -> {_j(node['type'])} (each type once)")
            return
        mapped: list[str] = []
        before = set(node)
        for name in names:
            kind = self._standard(name, node) if isinstance(name, str) else None
            if kind is None or kind == ANY:
                del node["type"]
                why = "any value" if kind == ANY else "not a type; any value"
                self.note(here, f"{_j(declared)} removed ({why})")
                return
            mapped.append(kind)
        mapped = list(dict.fromkeys(mapped))
        node["type"] = mapped if isinstance(declared, list) else mapped[0]
        implied = "".join(f", {_j(k)}: {_j(node[k])}" for k in node if k not in before)
        self.note(here, f"{_j(declared)} -> {_j(node['type'])}{implied}")

    def _standard(self, name: str, node: dict[str, Any]) -> str | None:
        """The standard type for ``name``; adds ``items`` / ``additionalProperties`` /
        ``uniqueItems`` that the name implies when the schema does not say them."""
        generic = _GENERIC.match(name)
        array_of = _ARRAY_OF.match(name)
        base = generic.group(1) if generic else "array" if array_of else name
        kind = intended_type(base.rsplit(".", 1)[-1])
        if kind == "array" and base.strip().lower() in SET_NAMES:
            node.setdefault("uniqueItems", True)
        inner = generic.group(2) if generic else array_of.group(1) if array_of else None
        if inner is not None and kind in ("array", "object"):
            args = _split_args(inner)
            element = intended_type(args[-1]) if args else None
            if element not in (None, ANY):
                target = "items" if kind == "array" else "additionalProperties"
                node.setdefault(target, {"type": element})
        return kind

    def _nullable(self, node: dict[str, Any], path: Path) -> None:
        if "nullable" not in node or not isinstance(node["nullable"], bool):
            return
        nullable = node.pop("nullable")
        declared = node.get("type")
        if nullable and isinstance(declared, str | list):
            names = declared if isinstance(declared, list) else [declared]
            if "null" not in names:
                node["type"] = [*names, "null"]
            enum = node.get("enum")
            if isinstance(enum, list) and None not in enum:
                enum.append(None)
        change = f"type {_j(node.get('type'))}" if nullable and declared is not None else "removed"
        self.note((*path, "nullable"), f"{_j(nullable)} (OpenAPI) -> {change}")

    def _required(self, node: dict[str, Any], path: Path) -> None:
        required = node.get("required")
        here = (*path, "required")
        if required is None or isinstance(required, bool):
            return  # a boolean one is a property flag: see _property_flags
        if isinstance(required, str):
            node["required"] = [required]
        elif isinstance(required, list):
            node["required"] = list(dict.fromkeys(r for r in required if isinstance(r, str)))
        else:
            return
        if self.dialect == "draft-04" and not node["required"]:
            del node["required"]  # draft-04 wants at least one name
            self.note(here, f"{_j(required)} removed (draft-04 needs at least one name)")
        elif node["required"] != required:
            self.note(here, f"{_j(required)} -> {_j(node['required'])}")

    def _property_flags(self, node: dict[str, Any], path: Path) -> None:
        """draft-03 ``"required": true`` and the ``"optional": true`` some data sets use,
        on a property, moved into the parent's ``required`` list."""
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return
        required = node.get("required")
        names = list(required) if isinstance(required, list) else []
        for name, sub in properties.items():
            if not isinstance(sub, dict):
                continue
            flag = sub.get("required")
            if isinstance(flag, bool):
                del sub["required"]
                if flag and name not in names:
                    names.append(name)
                moved = "added to the parent's required" if flag else "removed"
                self.note((*path, "properties", name, "required"), f"{_j(flag)} -> {moved}")
            if sub.get("optional") in (True, "true") and name in names:
                names.remove(name)
                self.note((*path, "required"), f"{_j(name)} removed (the property is optional)")
        if names != (required if isinstance(required, list) else []):
            if names or self.dialect != "draft-04":
                node["required"] = names
            else:
                node.pop("required", None)

    def _enum(self, node: dict[str, Any], path: Path) -> None:
        enum = node.get("enum")
        if enum is not None and not isinstance(enum, list):
            node["enum"] = [enum]
            self.note((*path, "enum"), f"{_j(enum)} -> {_j(node['enum'])}")

    def _shorthand(self, name: str, path: Path) -> dict[str, Any]:
        kind = intended_type(name)
        schema = {"type": kind} if kind not in (None, ANY) else {}
        self.note(path, f"{_j(name)} -> {_j(schema)}")
        return schema

    def _draft_forms(self, node: dict[str, Any], path: Path) -> None:
        items = node.get("items")
        if isinstance(items, list) and self.dialect == "2020-12":
            node["prefixItems"] = node.pop("items")
            change = '"items": [...] -> "prefixItems"'
            if "additionalItems" in node:
                node["items"] = node.pop("additionalItems")
                change += ', "additionalItems" -> "items"'
            self.note((*path, "items"), change + " (2020-12)")
        if self.dialect == "draft-04":
            return
        for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            flag = node.get(exclusive)
            if not isinstance(flag, bool):
                continue
            del node[exclusive]
            if flag and isinstance(node.get(bound), int | float):
                node[exclusive] = node.pop(bound)
                self.note((*path, exclusive), f"true -> {_j(node[exclusive])} (was {bound})")
            else:
                self.note((*path, exclusive), f"{_j(flag)} removed (draft-04 form)")


def _split_args(text: str) -> list[str]:
    """``"String, List<Integer>"`` -> ``["String", "List<Integer>"]`` (top-level commas)."""
    args, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        args.append(current.strip())
    return args


def _j(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)
