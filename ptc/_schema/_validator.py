"""JSON Schema handling for tool definitions (DESIGN sections 1 and 6): a schema is checked
once, at definition, and gets one cached validator; every problem, with a schema or with a
value, is reported at once with its JSON path, values shown as JSON.

At definition (:func:`compile_schema`), in this order, all problems of a stage together:
shape (plain JSON within :data:`~ptc._schema._checks.MAX_SCHEMA_DEPTH` levels and
:data:`~ptc._schema._checks.MAX_SCHEMA_BYTES` bytes), the declared ``$schema`` dialect, that
dialect's meta-schema (a non-standard type name gets the likely intended one), local-only
references. Validators resolve references through a registry that refuses retrieval, so no
schema ever makes ptc touch the network or the filesystem.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema.exceptions import ValidationError, best_match
from referencing.exceptions import Unresolvable

from .._errors import SchemaError
from .._json import JSON
from ._checks import (
    DIALECTS,
    Problem,
    dialect_of,
    format_path,
    offline_registry,
    reference_problems,
    shape_problems,
)
from ._quick import QuickCheck, quick_check
from ._type_names import STANDARD_TYPES, type_hint

__all__ = ("MAX_PROBLEMS", "SchemaValidator", "compile_schema", "json_text")

MAX_PROBLEMS = 20
"""Problems listed in one message; the rest are counted."""
_MAX_VALUE_CHARS = 80
_CACHE_ENTRIES = 1024


class SchemaValidator:
    """Validates JSON values against one checked schema."""

    __slots__ = ("_quick", "_validator", "dialect")

    def __init__(self, validator: Any, dialect: str, quick: QuickCheck | None = None) -> None:
        self._validator = validator
        self._quick = quick  # a plain schema's quick yes (``_quick``); jsonschema decides the rest
        self.dialect = dialect
        """The dialect the schema declared (``"2020-12"`` when it declared none)."""

    def problems(self, value: JSON) -> list[str]:
        """``"<json path>: <message>"`` for every way ``value`` fails (values shown as JSON,
        at most :data:`MAX_PROBLEMS` plus a count of the rest); ``[]`` if valid."""
        quick = self._quick
        if quick is not None and quick(value):
            return []
        validator = self._validator
        try:
            if validator.is_valid(value):
                return []
            found = sorted({f"{e.json_path}: {describe(e)}" for e in validator.iter_errors(value)})
        except RecursionError:
            return ["$: nested too deeply to validate"]
        except Unresolvable as exc:  # compile_schema resolved every reference; never expected
            return [f"$: the schema has a reference that does not resolve: {exc}"]
        return _capped(found)


def _capped(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return [*problems[:MAX_PROBLEMS], f"... and {len(problems) - MAX_PROBLEMS} more"]


_cache: OrderedDict[str, tuple[SchemaValidator | None, tuple[Problem, ...]]] = OrderedDict()
_cache_lock = threading.Lock()


def compile_schema(schema: object, where: str) -> SchemaValidator:
    """Check ``schema`` (DESIGN section 6) and return its validator; ``where`` names it in
    errors (``"tool 'x': input_schema"``). Raises :class:`ptc.SchemaError` listing every
    problem as ``"<where><path>: <message>"``. Validators are cached by schema content."""
    if not isinstance(schema, Mapping):
        raise SchemaError([f"{where} must be a JSON Schema object, got {type(schema).__name__}"])
    schema = dict(schema)
    shape = shape_problems(schema)
    if shape:
        raise SchemaError(_capped([f"{where}{format_path(p)}: {m}" for p, m in shape]))
    key = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
    if cached is None:
        cached = _compile(schema)
        with _cache_lock:
            _cache[key] = cached
            while len(_cache) > _CACHE_ENTRIES:
                _cache.popitem(last=False)
    validator, problems = cached
    if validator is None:
        raise SchemaError(_capped([f"{where}{format_path(p)}: {m}" for p, m in problems]))
    return validator


def _compile(schema: dict[str, Any]) -> tuple[SchemaValidator | None, tuple[Problem, ...]]:
    dialect, unknown = dialect_of(schema)
    if unknown is not None:
        return None, (unknown,)
    cls = DIALECTS[dialect]
    registry = offline_registry()
    try:
        meta = cls(cls.META_SCHEMA, registry=registry, format_checker=cls.FORMAT_CHECKER)
        problems = _meta_problems(meta.iter_errors(schema))
        try:
            problems += reference_problems(schema, dialect)
        except Exception:
            # Only a schema the meta-schema rejects (e.g. "$id": []) can trip the walk;
            # those problems say what is wrong. On a valid schema it would be a bug: raise.
            if not problems:
                raise
    except RecursionError:  # within the depth limit, but a stack already deep
        problems = [((), "nested too deeply to check")]
    if problems:
        return None, tuple(sorted(set(problems), key=lambda p: (format_path(p[0]), p[1])))
    return SchemaValidator(cls(schema, registry=registry), dialect, quick_check(schema)), ()


def _meta_problems(errors: Iterable[ValidationError]) -> list[Problem]:
    problems: list[Problem] = []
    for error in errors:
        path = tuple(error.absolute_path)
        if error.validator == "anyOf" and path and path[-1] == "type":
            problems.append((path, _type_problem(error.instance)))
        else:
            problems.append((path, describe(error) + _dialect_hint(path, error.instance)))
    return problems


_DRAFT_04 = "http://json-schema.org/draft-04/schema#"
_DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def _dialect_hint(path: tuple[str | int, ...], instance: object) -> str:
    """Forms of other drafts, met in a schema read as another one."""
    last = path[-1] if path else None
    if last == "required" and isinstance(instance, bool):
        return '; list required property names in the parent object\'s "required" (draft-03)'
    if last in ("exclusiveMinimum", "exclusiveMaximum") and _is_number(instance):
        bound = "minimum" if last == "exclusiveMinimum" else "maximum"
        return (
            f"; a numeric {last} is draft-06 and later: "
            f'in draft-04 write "{bound}" and "{last}": true'
        )
    if last in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(instance, bool):
        return (
            f"; a boolean {last} is draft-04: give the bound as a number, or declare "
            f'"$schema": "{_DRAFT_04}"'
        )
    if last == "items" and isinstance(instance, list):
        return (
            f'; an array of "items" is draft-07 and earlier: use "prefixItems", or declare '
            f'"$schema": "{_DRAFT_07}"'
        )
    return ""


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_problem(instance: object) -> str:
    names = instance if isinstance(instance, list) else [instance]
    bad = [n for n in names if not isinstance(n, str) or n not in STANDARD_TYPES]
    if not bad:  # e.g. a repeated name in a list
        return f"{json_text(instance)} is not a valid type list (names must be unique)"
    parts = []
    for name in bad:
        hint = type_hint(name) if isinstance(name, str) else ""
        parts.append(f"{json_text(name)} is not a JSON Schema type{hint}")
    if all(isinstance(n, str) and type_hint(n) for n in bad):
        return "; ".join(parts)
    return "; ".join(parts) + f" (the types are {', '.join(STANDARD_TYPES)})"


def json_text(value: object) -> str:
    """``value`` as compact JSON, shortened to about 80 characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


def describe(error: ValidationError) -> str:
    """One validation error in words, values as JSON (jsonschema's own messages use
    Python reprs: ``FrozenList([...])``, ``'x'``, ``True``)."""
    keyword, expected, value = error.validator, error.validator_value, error.instance
    shown = json_text(value)
    if keyword == "type":
        types = expected if isinstance(expected, list) else [expected]
        return f"{shown} is not of type {' or '.join(json_text(t) for t in types)}"
    if keyword == "required" and isinstance(expected, list) and isinstance(value, Mapping):
        for name in expected:
            if name not in value and error.message == f"{name!r} is a required property":
                return f"{json_text(name)} is a required property"
    if keyword in ("dependencies", "dependentRequired") and isinstance(expected, Mapping):
        for name, needs in expected.items():
            if isinstance(needs, list) and isinstance(value, Mapping) and name in value:
                for need in needs:
                    if error.message == f"{need!r} is a dependency of {name!r}":
                        return f"{json_text(need)} is required when {json_text(name)} is present"
    if keyword == "additionalProperties" and isinstance(value, Mapping):
        extra = _unexpected_keys(value, error.schema if isinstance(error.schema, Mapping) else {})
        if extra:
            listed = ", ".join(json_text(k) for k in extra)
            return f"unexpected {'property' if len(extra) == 1 else 'properties'} {listed}"
    if keyword == "enum":
        return f"{shown} is not one of {json_text(expected)}"
    if keyword == "const":
        return f"{shown} is not {json_text(expected)}"
    if keyword in ("anyOf", "oneOf") and error.context:
        if keyword == "oneOf" and "is valid under each of" in error.message:
            return f"{shown} matches more than one of the allowed schemas"
        best = best_match(error.context)
        return f"{shown} matches none of the allowed schemas (closest: {describe(best)})"
    if keyword == "not":
        return f"{shown} must not match {json_text(expected)}"
    if keyword in _LENGTHS:
        what, one, many = _LENGTHS[keyword]
        return f"{shown} {what} {expected} {one if expected == 1 else many}"
    if keyword == "pattern":
        return f"{shown} does not match the pattern {json_text(expected)}"
    if keyword == "uniqueItems":
        return f"{shown} has repeated items"
    if keyword is None or keyword is False or error.message.startswith("False schema"):
        return f"{shown} is not allowed here"
    message = str(error.message)
    # Other keywords (minimum, multipleOf, format, ...): jsonschema's words, JSON values.
    return message.replace(repr(value), shown, 1) if repr(value) in message else message


_LENGTHS = {
    "minLength": ("is shorter than", "character", "characters"),
    "maxLength": ("is longer than", "character", "characters"),
    "minItems": ("has fewer than", "item", "items"),
    "maxItems": ("has more than", "item", "items"),
    "minProperties": ("has fewer than", "property", "properties"),
    "maxProperties": ("has more than", "property", "properties"),
}


def _unexpected_keys(value: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties")
    known = set(properties) if isinstance(properties, Mapping) else set()
    patterns = schema.get("patternProperties")
    regexes = list(patterns) if isinstance(patterns, Mapping) else []
    return sorted(
        key for key in value if key not in known and not any(re.search(p, key) for p in regexes)
    )
