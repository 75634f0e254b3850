"""JSON Schema handling for tool definitions: what a schema may be, its one cached
validator, and the lenient rewrite of common non-standard forms.

The group's entry: the rest of ``ptc`` imports only these names, never its modules.
"""

from ._lenient import lenient_schema as lenient_schema
from ._validator import SchemaValidator as SchemaValidator
from ._validator import compile_schema as compile_schema

__all__ = ("SchemaValidator", "compile_schema", "lenient_schema")
