"""OpenAI strict mode: an input schema rewritten to what strict function calling accepts, and
the reading of the arguments such a schema makes a model send.

Strict mode wants every property of every object required and no other property allowed, so
an optional parameter becomes required *and nullable*: the model sends ``null`` for what it
leaves out. :func:`strict_schema` makes that rewrite (keywords strict mode refuses move into
the description as notes, so the model still reads them); :func:`drop_optional_nulls` is the
other half, used by the pipeline: a ``null`` where the tool's own schema does not allow one,
for a property it does not require, means "not sent".

A schema strict mode cannot express without changing what it accepts (an open map, an
untyped value, an array without an item type) is not rewritten: :func:`strict_schema`
returns ``None`` and the tool is offered non-strict.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Final

__all__ = ("drop_optional_nulls", "strict_schema")

# Keywords strict mode refuses; their values are kept as notes in the description.
_NOTED: Final = (
    "default",
    "minLength",
    "maxLength",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
)
_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_TYPED: Final = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const")
_MAX_DEPTH: Final = 10  # OpenAI's limits on one strict schema
_MAX_PROPERTIES: Final = 5000


class _NotStrict(Exception):
    """The schema cannot be made strict without changing what it accepts."""


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """``schema`` (a tool's input schema, an object) as OpenAI strict mode wants it, or
    ``None`` when it cannot be expressed there (see the module docstring)."""
    root = copy.deepcopy(dict(schema))
    counter = [0]
    try:
        out = _node(root, depth=0, counter=counter)
        for key in ("$defs", "definitions"):
            defs = root.get(key)
            if isinstance(defs, dict):
                out[key] = {k: _node(v, depth=1, counter=counter) for k, v in defs.items()}
    except _NotStrict:
        return None
    if out.get("type") != "object" or "anyOf" in out:
        return None
    return out


def _node(node: Any, *, depth: int, counter: list[int]) -> dict[str, Any]:
    if not isinstance(node, dict) or not any(k in node for k in _TYPED):
        raise _NotStrict  # an untyped value (`{}`, `true`)
    if depth > _MAX_DEPTH:
        raise _NotStrict
    out = {k: v for k, v in node.items() if k not in ("title", "$schema", "$defs", "definitions")}
    notes = [f"{k}={json.dumps(out.pop(k))}" for k in _NOTED if k in out]
    fmt = out.get("format")
    if isinstance(fmt, str) and fmt not in _FORMATS:
        notes.append(f"format={out.pop('format')}")
    if notes:
        text = ", ".join(notes)
        description = out.get("description")
        out["description"] = f"{description} ({text})" if description else text
    if "oneOf" in out:
        out["anyOf"] = out.pop("oneOf")
    for key in ("anyOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [_node(alt, depth=depth, counter=counter) for alt in out[key]]
    if "$ref" in out and len(out) > 1:  # strict mode allows no siblings beside a $ref
        out["anyOf"] = [{"$ref": out.pop("$ref")}]
    types = out.get("type")
    kinds = set(types) if isinstance(types, list) else {types}
    if "object" in kinds or "properties" in out:
        _object(out, depth=depth, counter=counter)
    if "array" in kinds:
        items = out.get("items")
        if not isinstance(items, dict):
            raise _NotStrict
        out["items"] = _node(items, depth=depth + 1, counter=counter)
    return out


def _object(out: dict[str, Any], *, depth: int, counter: list[int]) -> None:
    extra = out.get("additionalProperties", True)
    properties = out.get("properties") or {}
    if not isinstance(properties, dict) or (extra not in (True, False) and extra != {}):
        raise _NotStrict  # a map: strict mode has no way to say "any key"
    if extra is not False and not properties:
        raise _NotStrict  # an open object with nothing declared
    counter[0] += len(properties)
    if counter[0] > _MAX_PROPERTIES:
        raise _NotStrict
    required = set(out.get("required") or ())
    strict: dict[str, Any] = {}
    for name, sub in properties.items():
        converted = _node(sub, depth=depth + 1, counter=counter)
        strict[name] = converted if name in required else _nullable(converted)
    out["properties"] = strict
    out["required"] = list(strict)
    out["additionalProperties"] = False


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` that also accepts ``null`` (the model's way of leaving it out)."""
    if _accepts_null(node):
        return node
    types = node.get("type")
    if isinstance(types, str) and "anyOf" not in node and "$ref" not in node:
        out = {**node, "type": [types, "null"]}
        if isinstance(out.get("enum"), list):
            out["enum"] = [*out["enum"], None]
        return out
    if isinstance(node.get("anyOf"), list) and len(node) == 1:
        return {"anyOf": [*node["anyOf"], {"type": "null"}]}
    description = node.get("description")
    inner = {k: v for k, v in node.items() if k != "description"}
    wrapped: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if description is not None:
        wrapped["description"] = description
    return wrapped


def _accepts_null(node: Mapping[str, Any]) -> bool:
    types = node.get("type")
    if types == "null" or (isinstance(types, list) and "null" in types):
        return True
    alternatives = node.get("anyOf")
    return isinstance(alternatives, list) and any(
        isinstance(a, Mapping) and _accepts_null(a) for a in alternatives
    )


def drop_optional_nulls(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` without the ``null``s it holds for optional properties whose own schema
    does not allow ``null`` (nested objects too, through local ``$ref``s); ``value`` itself
    (the same object) when there is none to drop."""
    return _drop(schema, value, schema, 0)


def _drop(node: Any, value: Any, root: Mapping[str, Any], depth: int) -> Any:
    node = _resolve(node, root)
    if depth > 64 or not isinstance(node, Mapping):
        return value
    if isinstance(value, Mapping):
        properties = node.get("properties")
        if not isinstance(properties, Mapping):
            return value
        required = set(node.get("required") or ())
        out: dict[str, Any] = {}
        changed = False
        for key, item in value.items():
            sub = _resolve(properties.get(key), root)
            if (
                item is None
                and key in properties
                and key not in required
                and isinstance(sub, Mapping)
                and not _accepts_null(sub)
            ):
                changed = True
                continue
            new = _drop(sub, item, root, depth + 1) if sub is not None else item
            changed = changed or new is not item
            out[key] = new
        return out if changed else value
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        items = [_drop(node["items"], v, root, depth + 1) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def _resolve(node: Any, root: Mapping[str, Any]) -> Any:
    """Follow a local ``#/$defs/...`` reference (one hop at a time, at most a few)."""
    for _ in range(8):
        if not isinstance(node, Mapping) or not isinstance(node.get("$ref"), str):
            return node
        ref = node["$ref"]
        if not ref.startswith("#/"):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, Mapping) else None
        node = target
    return node
