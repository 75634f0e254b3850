"""Local references on the fast path (:mod:`sdkgen._simple_types`): the definitions a part
(the input or the output schema) declares, the generator's names for them, and the order
the generator writes its module in.

pydantic writes the models and enums a tool's types use under ``$defs`` and points at them
with ``{"$ref": "#/$defs/Name"}`` (older writers and many servers: ``definitions``). The
generator writes one type per definition, used or not: a TypedDict for an object with
properties, an alias for anything else, named after the key under the part's root
(``Page_Person_`` in the input -> ``PInputPagePerson``); a part's definitions come first,
in their order, then its root's own types. It then moves every type after the types it names
(:func:`generator_order`); a cycle (a recursive model) is ordered its own way, so it is
left to it, and so is anything this module cannot name as it does (a key that is no plain
word, both ``$defs`` and ``definitions``, a reference to anything but a definition).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from ._type_ast import bound_name, class_fields, names_in

__all__ = ("CONTAINERS", "generator_order", "local_definitions", "referenced", "upper_camel")

CONTAINERS = ("$defs", "definitions")
# Keys the generator names by upper-camel-casing them (it names others in ways of its own:
# "Model-1" -> "Model1", "1abc" -> "Model1abc", "_" -> "Model").
_NAMED_KEY = re.compile(r"_*[A-Za-z][A-Za-z0-9_]*\Z")


def upper_camel(name: str) -> str:
    """The generator's class name for ``<Parent>_<key>`` (a plain key or definition)."""
    return "".join(part[0].upper() + part[1:] for part in name.split("_") if part)


def local_definitions(
    schema: Mapping[str, Any], root: str
) -> dict[str, tuple[str, Mapping[str, Any]]] | None:
    """``{reference: (type name, definition)}`` of the definitions ``schema`` declares at
    its root (the part's root type is ``root``), in their order; ``None`` when the
    generator would name them otherwise."""
    found = [key for key in CONTAINERS if key in schema]
    if not found:
        return {}
    if len(found) > 1:
        return None
    (container,) = found
    declared = schema[container]
    if not isinstance(declared, Mapping):
        return None
    out: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for key, definition in declared.items():
        if not (type(key) is str and _NAMED_KEY.match(key) and isinstance(definition, Mapping)):
            return None
        out[f"#/{container}/{key}"] = (upper_camel(f"{root}_{key}"), definition)
    return out


def referenced(schema: Mapping[str, Any]) -> str | None:
    """The reference of ``{"$ref": ...}`` or ``{"allOf": [{"$ref": ...}]}`` (annotations
    aside: other keywords beside a reference are the generator's to read)."""
    members = schema.get("allOf", [schema])
    if not (isinstance(members, list) and len(members) == 1):
        return None
    (member,) = members
    ref = member.get("$ref") if isinstance(member, Mapping) else None
    if not isinstance(ref, str) or (member is not schema and len(member) != 1):
        return None
    return ref


def generator_order(body: list[ast.stmt]) -> list[ast.stmt] | None:
    """``body`` (one type per statement, each after the nested types it holds) in the
    generator's order: passes over the types left, each placing those whose references
    are all placed; ``None`` for a cycle."""
    names = {bound_name(stmt) for stmt in body}
    pending = [(stmt, _references(stmt) & names) for stmt in body]
    placed: set[str | None] = set()
    out: list[ast.stmt] = []
    while pending:
        left = []
        for stmt, references in pending:
            if references <= placed:
                out.append(stmt)
                placed.add(bound_name(stmt))
            else:
                left.append((stmt, references))
        if len(left) == len(pending):
            return None
        pending = left
    return out


def _references(stmt: ast.stmt) -> set[str | None]:
    """The names a type's annotations use (not its field names)."""
    if isinstance(stmt, ast.ClassDef):
        return set().union(*(names_in(field.annotation) for field in class_fields(stmt)))
    value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
    return set(names_in(value)) if value is not None else set()
