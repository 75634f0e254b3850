"""JSON Schema handling for tool definitions: what a schema may be, its one cached
validator, the lenient rewrite of common non-standard forms, and OpenAI's strict mode.

The group's entry: the rest of ``ptc`` imports only these names, never its modules.
"""

from ._lenient import lenient_schema as lenient_schema
from ._strict import drop_optional_nulls as drop_optional_nulls
from ._strict import strict_schema as strict_schema
from ._validator import SchemaValidator as SchemaValidator
from ._validator import compile_schema as compile_schema

__all__ = (
    "SchemaValidator",
    "compile_schema",
    "drop_optional_nulls",
    "lenient_schema",
    "strict_schema",
)
