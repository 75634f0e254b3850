"""``lenient_schema``: rewrite common non-standard JSON Schema forms to standard ones.

PLACEHOLDER (branch ``mcp``): the real rewriter (``dict``, ``float``, ``tuple``, Java class
names, ...) is written on the ``schemas`` branch; at merge, that version replaces this file.
This one returns the schema unchanged so that ``ptc.mcp``'s ``on_bad_schema="lenient"`` has
the call it needs.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._json import JSON

__all__ = ("lenient_schema",)


def lenient_schema(schema: Mapping[str, object]) -> tuple[dict[str, JSON], list[str]]:
    """``(rewritten schema, notes saying what changed)``. Placeholder: no rewriting yet."""
    return {k: v for k, v in schema.items()}, []  # type: ignore[misc]
