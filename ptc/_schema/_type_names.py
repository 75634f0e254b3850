"""Type names from the wild and the standard JSON Schema type each most likely means.

Used for the hint of a schema problem (``"dict" is not a JSON Schema type (did you mean
"object"?)``) and by :func:`ptc.lenient_schema` to rewrite the name.
"""

from __future__ import annotations

import difflib
import json

__all__ = ("ANY", "SET_NAMES", "STANDARD_TYPES", "intended_type", "type_hint")

STANDARD_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
ANY = ""
""":func:`intended_type` for a name that means "any value" (no ``type`` at all)."""
_ALIASES = {
    "object": (
        "dict dictionary map hashmap treemap linkedhashmap hashtable mapping obj struct record "
        "jsonobject"
    ),
    "array": (
        "list tuple arraylist linkedlist vector sequence seq collection iterable jsonarray "
        "set hashset treeset frozenset"
    ),
    "number": "float double decimal real numeric num bigdecimal float32 float64",
    "integer": (
        "int long short byte int8 int16 int32 int64 uint uint8 uint16 uint32 uint64 bigint "
        "biginteger"
    ),
    "string": "str char character text charsequence",
    "boolean": "bool",
    "null": "none nonetype nil void",
    ANY: "any anytype unknown mixed",
}
_INTENDED = {alias: std for std, names in _ALIASES.items() for alias in names.split()}
_INTENDED.update({std: std for std in STANDARD_TYPES})
SET_NAMES = frozenset({"set", "hashset", "treeset", "frozenset"})
"""Names of types whose items are unique (``uniqueItems`` when rewritten to ``array``)."""


def intended_type(name: str) -> str | None:
    """The standard type ``name`` most likely means: ``"object"`` for ``"dict"``/``"HashMap"``,
    ``"string"`` for ``"String"``, :data:`ANY` (``""``) for ``"any"`` and ``""``; a close
    spelling (``"strng"``) counts; ``None`` when nothing is likely."""
    key = name.strip().lower()
    if key in _INTENDED:
        return _INTENDED[key]
    if not key:
        return ANY
    close = difflib.get_close_matches(key, STANDARD_TYPES, n=1, cutoff=0.75)
    return close[0] if close else None


def type_hint(name: str) -> str:
    """`` (did you mean "object"?)`` or the like; ``""`` when there is no likely type."""
    intended = intended_type(name)
    if intended is None:
        return ""
    if intended == ANY:
        return ' (to allow any value, leave out "type")'
    return f" (did you mean {_json(intended)}?)"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
