"""A quick yes for the plain schemas most tools have, so a valid value skips jsonschema.

Every call checks its arguments against the tool's input schema and its value against the
output schema; through jsonschema that costs several microseconds even for ``{}`` against
``{"type": "object", "properties": {}}``, a sizeable share of a nested call. The schemas
``@tool`` makes from type hints use a handful of keywords: :func:`quick_check` compiles a
schema written only with them into a predicate that answers ``True`` only for a value the
schema accepts. ``False`` means "not sure": the caller asks jsonschema, which then finds
the problems (or accepts the value after all: an integral float is an ``integer`` from
draft 6 on, and this says "not sure" for it). So validation accepts and refuses exactly
what jsonschema does; this only answers the common case sooner.

Supported, in every dialect ptc knows (draft 4 to 2020-12, where these keywords mean the
same): ``type`` (a name or a list of names), ``properties``, ``required``,
``additionalProperties`` (a boolean or a schema), ``items`` (a schema), ``anyOf``, ``enum``
of strings, boolean schemas, and the annotations that never make a value invalid
(``title``, ``description``, ``default``, ``examples``, ``$comment``, ``deprecated``,
``readOnly``, ``writeOnly``). A schema with any other keyword anywhere gets no predicate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._json import FrozenDict, FrozenList

__all__ = ("QuickCheck", "quick_check")

QuickCheck = Callable[[object], bool]
"""``True``: the value is valid; ``False``: not sure (ask the full validator)."""

_ANNOTATIONS = frozenset(
    ("title", "description", "default", "examples", "$comment", "deprecated")
    + ("readOnly", "writeOnly")
)
_KEYWORDS = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
}
_ROOT_ONLY = frozenset(("$schema",))  # the dialect; the supported keywords mean the same in each
_MAX_DEPTH = 32  # deeper schemas are rare: no quick path rather than a deep recursion


def _exact(*kinds: type) -> QuickCheck:
    return lambda value: type(value) in kinds


# jsonschema's type checker, narrowed to the exact types a frozen JSON value has (anything
# else is "not sure"): ``True`` is a boolean only, never an integer or a number.
_OBJECT_TYPES = (dict, FrozenDict)
_ARRAY_TYPES = (list, FrozenList)
_TYPES: dict[str, tuple[type, ...]] = {
    "null": (type(None),),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "object": _OBJECT_TYPES,
    "array": _ARRAY_TYPES,
}


def quick_check(schema: object) -> QuickCheck | None:
    """A predicate that is ``True`` only for values ``schema`` accepts (``False``: not
    sure), or ``None`` when the schema uses anything beyond the supported keywords."""
    if isinstance(schema, Mapping) and _ROOT_ONLY & schema.keys():
        schema = {k: v for k, v in schema.items() if k not in _ROOT_ONLY}
    try:
        return _compile(schema, 0)
    except _Unsupported:
        return None


class _Unsupported(Exception):
    """The schema uses something this module does not check."""


def _compile(schema: object, depth: int) -> QuickCheck:
    if depth > _MAX_DEPTH:
        raise _Unsupported
    if schema is True:
        return lambda value: True
    if schema is False:
        return lambda value: False
    if not isinstance(schema, Mapping) or not schema.keys() <= _KEYWORDS:
        raise _Unsupported
    checks: list[QuickCheck] = []
    kinds = schema.get("type")
    objects = schema.keys() & {"properties", "required", "additionalProperties"}
    if kinds is not None and not (
        kinds == "object" and objects or kinds == "array" and "items" in schema
    ):
        checks.append(_type_check(kinds))  # (the object or items check requires the type)
    if "enum" in schema:
        checks.append(_enum_check(schema["enum"]))
    if "anyOf" in schema:
        checks.append(_any_of(schema["anyOf"], depth))
    if objects:
        checks.append(_object_check(schema, depth))
    if "items" in schema:
        checks.append(_items_check(schema["items"], depth))
    if not checks:
        return lambda value: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda value: first(value) and second(value)
    return lambda value: all(check(value) for check in checks)


def _type_check(declared: object) -> QuickCheck:
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list) or not names:
        raise _Unsupported
    kinds: list[type] = []
    for name in names:
        if not isinstance(name, str) or name not in _TYPES:
            raise _Unsupported
        kinds += _TYPES[name]
    return _exact(*kinds)


def _enum_check(values: object) -> QuickCheck:
    if not isinstance(values, list) or not all(type(v) is str for v in values):
        raise _Unsupported  # equality across types (1 == 1.0, True != 1) is jsonschema's
    allowed = frozenset(values)
    return lambda value: type(value) is str and value in allowed


def _any_of(branches: object, depth: int) -> QuickCheck:
    if not isinstance(branches, list) or not branches:
        raise _Unsupported
    checks = [_compile(branch, depth + 1) for branch in branches]
    return lambda value: any(check(value) for check in checks)


def _object_check(schema: Mapping[str, Any], depth: int) -> QuickCheck:
    """``properties``, ``required`` and ``additionalProperties``: for objects only (any
    other value is not sure here unless ``type`` already said what it must be)."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise _Unsupported
    if not all(type(name) is str for name in required):
        raise _Unsupported
    known = {name: _compile(sub, depth + 1) for name, sub in properties.items()}
    needed = tuple(required)
    others: QuickCheck | None = None if extra is True else _compile(extra, depth + 1)

    def check(value: object) -> bool:
        if type(value) not in _OBJECT_TYPES:
            return False
        assert isinstance(value, dict)
        for name in needed:
            if name not in value:
                return False
        for name, item in value.items():
            sub = known.get(name)
            if sub is not None:
                if not sub(item):
                    return False
            elif others is not None and not others(item):
                return False
        return True

    return check


def _items_check(items: object, depth: int) -> QuickCheck:
    if isinstance(items, list):
        raise _Unsupported  # the tuple form (draft 7 and earlier) or an error (2020-12)
    item_check = _compile(items, depth + 1)

    def check(value: object) -> bool:
        if type(value) not in _ARRAY_TYPES:
            return False
        assert isinstance(value, list)
        return all(item_check(item) for item in value)

    return check
