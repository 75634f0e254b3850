"""JSON Schema handling for tool definitions: checked once at registration, one cached
validator per schema, every problem reported with its JSON path."""

from __future__ import annotations

from collections.abc import Mapping

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as _JsonschemaSchemaError

from ._errors import SchemaError
from ._json import JSON

__all__ = ("SchemaValidator", "compile_schema")


class SchemaValidator:
    """Validates JSON values against one checked schema."""

    __slots__ = ("_validator",)

    def __init__(self, validator: Draft202012Validator) -> None:
        self._validator = validator

    def problems(self, value: JSON) -> list[str]:
        """``"<json path>: <message>"`` for every way ``value`` fails, sorted; ``[]`` if valid."""
        validator = self._validator
        if validator.is_valid(value):
            return []
        return sorted(f"{e.json_path}: {e.message}" for e in validator.iter_errors(value))


def compile_schema(schema: object, where: str) -> SchemaValidator:
    """Check ``schema`` against its meta-schema; ``where`` names it in errors
    (``"tool 'x': input_schema"``). Raises :class:`ptc.SchemaError`."""
    if not isinstance(schema, Mapping):
        raise SchemaError([f"{where} must be a JSON Schema object, got {type(schema).__name__}"])
    try:
        Draft202012Validator.check_schema(schema)
    except _JsonschemaSchemaError as exc:
        path = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        raise SchemaError([f"{where}{path}: {exc.message}"]) from exc
    return SchemaValidator(Draft202012Validator(schema))
