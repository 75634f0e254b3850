"""Input and output types of the SDK generator.

The generated *worker module* expects one injected global, ``__transport__``, an object
satisfying :class:`Transport`. The worker (or a test) creates the module namespace with
it and executes the module source there; the namespace then holds ``tools``,
``parallel`` and ``ToolCallError`` for the program.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class Transport(Protocol):
    """How SDK calls leave the process.

    ``call_batch`` sends calls submitted together (a batch of one for an ordinary call)
    and blocks until all are answered. It returns, per call and in order, either
    ``(True, value)`` or ``(False, (code, message))``. Tool names and argument keys are
    the original ones (``from_`` is sent as ``"from"``).
    """

    def call_batch(self, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, Any]]: ...


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """One tool as the SDK sees it: what the model is told, nothing the host keeps."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    output_schema: Mapping[str, Any] | bool | None = None
    """``None``, ``{}`` or ``true``: any JSON value (typed as the shared ``JSON`` alias)."""


@dataclass(frozen=True, kw_only=True)
class ParamBinding:
    """One keyword parameter: its Python identifier and the original property key."""

    ident: str
    key: str
    required: bool


@dataclass(frozen=True, kw_only=True)
class ToolBinding:
    """How one tool appears in the SDK: ``tools.<ident>(**params)`` -> tool ``name``.

    ``extra``: the tool's input schema accepts keys besides ``params`` (no
    ``additionalProperties: false``), so other keyword arguments are sent as they are."""

    name: str
    ident: str
    params: tuple[ParamBinding, ...]
    extra: bool = False

    def param_idents(self) -> tuple[str, ...]:
        return tuple(p.ident for p in self.params)


@dataclass(frozen=True, kw_only=True)
class Sdk:
    """A generated SDK: the stub the model reads, the module the worker runs, and how
    identifiers map back to tool names and keys (used by pre-flight checks)."""

    stub: str
    module: str
    digest: str
    tools: tuple[ToolBinding, ...]

    def by_ident(self) -> dict[str, ToolBinding]:
        return {t.ident: t for t in self.tools}
