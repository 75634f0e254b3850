"""A server's tool listing as ptc definitions, screened.

Each listed tool becomes a :func:`~ptc.define_tool` definition named ``prefix`` + its MCP
name, whose body the mount gives. What cannot be mounted is refused or left out: a name
the server lists twice, a name that clashes with a tool the scope already sees (or with
``run_code``), a schema the wire could not carry, a schema ``on_bad_schema`` does not
accept. At mount time (``strict``) such a problem raises, as ``on_bad_schema`` says (a
clash always); after ``list_changed`` the tool is left out and the mount says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any, NamedTuple

import mcp.types as types

import ptc

from ._convert import BadSchemaPolicy, build_definition
from ._wire import REFUSED_SCHEMA

__all__ = ("Body", "Listing", "ListingBuilder")

Body = Callable[[str, bool], Callable[[ptc.FrozenDict, ptc.ToolContext], Any]]
"""``body(mcp_name, structured)``: the ``execute`` of the definition of one MCP tool."""


class Listing(NamedTuple):
    """The definitions of a listing, and the tools left out of it."""

    definitions: list[ptc.ToolDefinition]
    skipped: dict[str, str]
    """MCP tool name -> why it was left out."""
    notes: dict[str, tuple[str, ...]]
    """Registered name -> what ``lenient_schema`` rewrote."""


class ListingBuilder:
    """Builds the definitions of one mount's listings (its server, scope, prefix, policy)."""

    def __init__(
        self,
        label: str,
        scope: ptc.Scope,
        prefix: str,
        on_bad_schema: BadSchemaPolicy,
        timeout_seconds: float | None,
        body: Body,
    ) -> None:
        self._label = label
        self._scope = scope
        self._prefix = prefix
        self._policy = on_bad_schema
        self._timeout = timeout_seconds
        self._body = body

    def build(
        self,
        tools: list[types.Tool],
        *,
        strict: bool,
        visible: Mapping[str, ptc.ToolDefinition],
        registered: Collection[str],
    ) -> Listing:
        """The definitions of ``tools``, and those left out. ``visible``: what the scope
        sees; ``registered``: the names the mount registered so far (they may be replaced)."""
        policy: BadSchemaPolicy = self._policy if strict or self._policy != "raise" else "skip"
        definitions: list[ptc.ToolDefinition] = []
        skipped: dict[str, str] = {}
        notes: dict[str, tuple[str, ...]] = {}
        seen: set[str] = set()
        for tool in tools:
            name = self._prefix + tool.name
            if tool.name in seen:
                # The server's fault, not the host's: it follows on_bad_schema.
                duplicate = f"the server lists {tool.name!r} more than once"
                if strict and policy == "raise":
                    raise ptc.ScopeError(f"MCP server {self._label!r}: {duplicate}")
                skipped[f"{tool.name} (again)"] = duplicate
                continue
            seen.add(tool.name)
            if name == ptc.RUN_CODE or (name in visible and name not in registered):
                clash = (
                    f"cannot mount MCP tool {tool.name!r} of {self._label!r} as {name!r}:"
                    f" {self._scope!r} already has a tool {name!r}"
                    f" ({_what(visible.get(name))}); mount with another prefix="
                )
                if strict:  # the host's choice of names: always an error at mount time
                    raise ptc.ScopeError(clash)
                skipped[tool.name] = clash
                continue
            refused = [
                f"tool {name!r}: {key}: {schema[REFUSED_SCHEMA]}"
                for key, schema in (
                    ("inputSchema", tool.input_schema),
                    ("outputSchema", tool.output_schema),
                )
                if schema is not None and REFUSED_SCHEMA in schema
            ]
            if refused:  # a schema the wire could not carry (see parse_message)
                if strict and policy != "skip":
                    raise ptc.SchemaError(refused)
                skipped[tool.name] = str(ptc.SchemaError(refused))
                continue
            structured = tool.output_schema is not None
            try:
                built = build_definition(
                    tool,
                    name=name,
                    execute=self._body(tool.name, structured),
                    structured=structured,
                    timeout_seconds=self._timeout,
                    on_bad_schema=policy,
                )
            except ValueError as exc:  # "lenient" was not enough
                if strict:
                    raise
                skipped[tool.name] = str(exc)
                continue
            if built.definition is None:
                skipped[tool.name] = built.problem or "not accepted"
                continue
            definitions.append(built.definition)
            if built.notes:
                notes[name] = built.notes
        return Listing(definitions, skipped, notes)


def _what(definition: ptc.ToolDefinition | None) -> str:
    if definition is None:
        return "reserved"
    return json.dumps(definition.description[:60])
