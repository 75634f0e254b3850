"""Schemas of any supported draft, read as one: what the type generator and the docstrings see.

``$schema`` may declare draft-04, -06, -07, 2019-09 or 2020-12 (DESIGN section 6); the
forms that differ are rewritten to their 2020-12 equivalent before typing:

- ``items: [...]`` (+ ``additionalItems``), draft-07 and earlier -> ``prefixItems`` (+ ``items``);
- a boolean ``exclusiveMinimum`` / ``exclusiveMaximum`` (draft-04) -> the numeric form.

Then, for typing only (the host validates with the schema as written):

- an array with ``prefixItems`` is typed as a list of the union of its item types;
- an object with ``patternProperties`` is open even with ``additionalProperties: false``
  (the host accepts keys that match a pattern);
- a ``$ref`` that does not start with ``#`` is not followed (the type generator would read
  local files): it becomes ``{}`` (typed as ``JSON``) and a note says so. ``ptc`` refuses
  such schemas at definition anyway; this keeps ``sdkgen`` alone from touching files.

Nothing here recurses deeper than :data:`MAX_DEPTH` levels; anything deeper is typed as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ("MAX_DEPTH", "closed_object", "for_typing", "is_any", "modern")

MAX_DEPTH = 200
# Keywords whose value is one subschema / a list of them / a map of them.
_ONE = (
    "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "contains",
    "propertyNames", "not", "if", "then", "else", "items", "additionalItems",
)  # fmt: skip
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords that only describe (a schema made of only these accepts every value).
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "title", "description", "default", "examples",
     "deprecated", "readOnly", "writeOnly"}
)  # fmt: skip


def is_any(schema: object) -> bool:
    """``None``, ``true``, ``{}`` or only annotations: the value may be any JSON."""
    if schema is None or schema is True:
        return True
    return isinstance(schema, Mapping) and set(schema) <= _ANNOTATIONS


def closed_object(schema: Mapping[str, Any]) -> bool:
    """Whether the host rejects keys other than the declared properties."""
    closed = schema.get("additionalProperties") is False
    closed = closed or schema.get("unevaluatedProperties") is False
    return closed and not schema.get("patternProperties")


def for_typing(schema: Mapping[str, Any], notes: list[str], part: str) -> dict[str, Any]:
    """A copy of ``schema`` in the forms the type generator reads (see the module doc);
    ``notes`` gets one line per reference that was not followed."""
    out = _rewrite(schema, 0, notes, part, typing=True)
    return out if isinstance(out, dict) else {}


def modern(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` with the forms of older drafts in their 2020-12 spelling."""
    out = _rewrite(schema, 0, [], "input", typing=False)
    return out if isinstance(out, dict) else {}


def _rewrite(node: object, depth: int, notes: list[str], part: str, *, typing: bool) -> object:
    if not isinstance(node, Mapping):
        return node
    if depth > MAX_DEPTH:
        notes.append(f"{part} schema nested deeper than {MAX_DEPTH} levels; typed as JSON")
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#"):
        notes.append(f"{part} schema: $ref {ref!r} not followed (only local references); JSON")
        return {k: v for k, v in node.items() if k in _ANNOTATIONS}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _MAP and isinstance(value, Mapping):
            out[key] = {
                k: _rewrite(v, depth + 1, notes, part, typing=typing) for k, v in value.items()
            }
        elif key in _MANY and isinstance(value, list):
            out[key] = [_rewrite(v, depth + 1, notes, part, typing=typing) for v in value]
        elif key in _ONE:
            out[key] = (
                [_rewrite(v, depth + 1, notes, part, typing=typing) for v in value]
                if isinstance(value, list)
                else _rewrite(value, depth + 1, notes, part, typing=typing)
            )
        else:
            out[key] = value
    _modern_forms(out)
    if typing:
        _typing_forms(out)
    return out


def _modern_forms(node: dict[str, Any]) -> None:
    items = node.get("items")
    if isinstance(items, list):  # draft-07 and earlier: a tuple
        node["prefixItems"] = items
        rest = node.pop("additionalItems", None)
        if rest is None:
            del node["items"]
        else:
            node["items"] = rest
    else:
        node.pop("additionalItems", None)  # meaningless unless items is an array
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = node.get(exclusive)
        if isinstance(flag, bool):  # draft-04
            del node[exclusive]
            if flag and bound in node:
                node[exclusive] = node.pop(bound)


def _typing_forms(node: dict[str, Any]) -> None:
    prefix = node.pop("prefixItems", None)
    if isinstance(prefix, list) and prefix:
        rest = node.get("items")
        options = [*prefix, *([] if rest in (None, False) else [rest])]
        node["items"] = {"anyOf": options} if len(options) > 1 else options[0]
    if node.get("patternProperties") and node.get("additionalProperties") is False:
        del node["additionalProperties"]
