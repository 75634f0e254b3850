"""A scope's own layer, the four-step visibility algorithm and the model-facing tool specs.

Plain data and pure functions: :class:`~ptc._scopes._scope.Scope` keeps one :class:`Layer` and
asks :func:`visible_tools` for its view over the chain of layers from the root.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, get_args

from worker import Limits, Profile

from .._calls._policy import Guard
from .._calls._tools import ToolDefinition
from .._errors import ConfigurationError, UsageError
from .._json import JSON, JSONLike, thaw
from .._schema import strict_schema

__all__ = (
    "DISCOVERY_MODES",
    "MODES",
    "PROFILES",
    "Layer",
    "Mode",
    "ModelFormat",
    "Profile",
    "Restriction",
    "ToolView",
    "Discovery",
    "DiscoveryMode",
    "mcp_output_schema",
    "model_spec",
    "names_of",
    "visible_tools",
)

Mode: TypeAlias = Literal["native", "code", "both"]
MODES: tuple[Mode, ...] = ("native", "code", "both")
PROFILES: tuple[Profile, ...] = get_args(Profile)
ModelFormat: TypeAlias = Literal["raw", "openai", "anthropic", "mcp"]
DiscoveryMode: TypeAlias = Literal["auto", "inline", "search"]
DISCOVERY_MODES: tuple[DiscoveryMode, ...] = ("auto", "inline", "search")
DEFAULT_INLINE_TOKENS = 6000


@dataclass(frozen=True, kw_only=True, slots=True)
class Discovery:
    """How a code-mode scope shows its tools to the model (``present_as(discovery=...)``):
    ``inline`` every stub in ``run_code``'s description; ``search`` the pinned tools' stubs
    and ``catalog.search`` for the rest; ``auto`` inline while the estimated description
    is at most ``inline_tokens``, else search."""

    mode: DiscoveryMode = "auto"
    inline_tokens: int = DEFAULT_INLINE_TOKENS
    pin: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolView:
    """What a scope sees: ``visible`` (ordered name -> definition) and the names it may name."""

    visible: Mapping[str, ToolDefinition]
    known_names: frozenset[str]
    restrictable_names: frozenset[str]


@dataclass(frozen=True, slots=True)
class Restriction:
    allow: frozenset[str] | None
    deny: frozenset[str]

    def admits(self, name: str) -> bool:
        return (self.allow is None or name in self.allow) and name not in self.deny


@dataclass(slots=True)
class Layer:
    """What one scope registered itself: tools, restrictions, guards and its code options."""

    tools: dict[str, ToolDefinition] = field(default_factory=dict)
    restrictions: list[Restriction] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    mode: Mode | None = None
    profile: Profile | None = None
    limits: Limits | None = None
    discovery: DiscoveryMode | None = None
    inline_tokens: int | None = None
    pin: tuple[str, ...] | None = None

    def clear_options(self) -> None:
        self.mode = self.profile = self.limits = None
        self.discovery = self.inline_tokens = self.pin = None


def visible_tools(layers: Sequence[Layer]) -> tuple[dict[str, ToolDefinition], frozenset[str]]:
    """Steps 1-3 of the view for the scope whose root-first chain of layers is ``layers``:
    ``(visible tools in order, restrictable names)``. Step 4 (``run_code``) is the scope's."""
    own = layers[-1]
    inherited: dict[str, ToolDefinition] = {}
    for layer in layers[:-1]:
        inherited.update(layer.tools)
    restrictions = [r for layer in layers for r in layer.restrictions]
    visible = {
        name: d for name, d in inherited.items() if all(r.admits(name) for r in restrictions)
    }
    # The scope's own tools are added unfiltered and shadow inherited names.
    visible.update(own.tools)
    return visible, frozenset(inherited)


def names_of(names: Iterable[str], label: str) -> frozenset[str]:
    """Validate an ``allow=``/``deny=`` argument: an iterable of tool names, not a string."""
    if isinstance(names, str):
        raise UsageError(f"{label}= takes a list of names, not a string")
    out = list(names)
    if not all(isinstance(n, str) for n in out):
        raise UsageError(f"{label}= takes tool names (strings)")
    return frozenset(out)


def model_spec(
    definition: ToolDefinition, format: ModelFormat, *, strict: bool = False
) -> dict[str, JSON]:
    """One tool as a model API wants it: name, description and input schema; ``mcp`` adds
    ``title``, ``outputSchema``, ``annotations`` and ``_meta`` when the definition has them.

    ``strict`` (``openai`` only): the schema in OpenAI strict mode (every property required,
    optional ones nullable, no other property) and ``"strict": true``; a schema strict mode
    cannot express is sent as it is, with ``"strict": false``."""
    name, description = definition.name, definition.description
    schema = _object(definition.input_schema)
    if strict and format != "openai":
        raise ConfigurationError(f"strict=True is for format='openai', not {format!r}")
    if format in ("raw", "anthropic"):
        return {"name": name, "description": description, "input_schema": schema}
    if format == "openai":
        fn: dict[str, JSON] = {"name": name, "description": description, "parameters": schema}
        if strict:
            rewritten = strict_schema(schema)
            if rewritten is not None:
                fn["parameters"] = rewritten
            fn["strict"] = rewritten is not None
        return {"type": "function", "function": fn}
    if format == "mcp":
        return _mcp_spec(definition, schema)
    raise ConfigurationError(f"format must be raw, openai, anthropic or mcp, got {format!r}")


def _object(mapping: Mapping[str, JSONLike]) -> dict[str, JSON]:
    """A plain, independent copy of a JSON object (a schema)."""
    copy = thaw(mapping)
    assert isinstance(copy, dict)
    return copy


def _mcp_spec(definition: ToolDefinition, input_schema: dict[str, JSON]) -> dict[str, JSON]:
    spec: dict[str, JSON] = {"name": definition.name}
    if definition.title is not None:
        spec["title"] = definition.title
    spec["description"] = definition.description
    spec["inputSchema"] = input_schema
    output = mcp_output_schema(definition.output.schema)
    if output is not None:
        spec["outputSchema"] = output
    if definition.annotations:
        spec["annotations"] = dict(definition.annotations)
    if definition.meta:
        spec["_meta"] = dict(definition.meta)
    return spec


# Keys that belong to a schema document's root, not to the value it describes: a wrapped
# schema keeps them at the root so that `#/$defs/...` references still resolve.
_ROOT_KEYWORDS = ("$schema", "$id", "$defs", "definitions")


def mcp_output_schema(schema: Mapping[str, JSONLike]) -> dict[str, JSON] | None:
    """A tool's output schema as MCP's ``outputSchema`` (which must describe an object).

    ``None`` for a schema that says nothing (``{}``: any JSON); an object schema as is;
    anything else wrapped as ``{"type": "object", "properties": {"result": <schema>},
    "required": ["result"]}`` (its value is then sent as ``{"result": value}``).
    """
    if not schema:
        return None
    plain = _object(schema)
    if plain.get("type") == "object":
        return plain
    inner: dict[str, JSON] = {k: v for k, v in plain.items() if k not in _ROOT_KEYWORDS}
    wrapped: dict[str, JSON] = {k: plain[k] for k in _ROOT_KEYWORDS if k in plain}
    wrapped.update(type="object", properties={"result": inner}, required=["result"])
    return wrapped
