"""Identifier mapping: tool names and property keys -> Python identifiers
(docs/sdk.md, "Identifiers").

Tool names: characters outside ``[A-Za-z0-9_]`` become ``_``; an empty result or one that
starts with a digit or ``_`` gets the prefix ``t_``; keywords, builtins and the SDK's own
globals (``tools parallel catalog ToolCallError``) and ``call`` (``tools.call``) get a
trailing ``_``. Mapped names that collide
get ``_2``, ``_3``, ... in the sorted order of the original names; a name that needs no
mapping keeps its identifier.

Property keys: the same character rule; a leading digit (or an empty key) gets ``p_``;
only keywords get a trailing ``_``. Keys of one tool collide the same way.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Callable, Iterable

_NON_IDENT = re.compile(r"[^A-Za-z0-9_]")
# The program's globals, and `call` (tools.call, by original name), are never tool idents.
_SDK_GLOBALS = frozenset({"tools", "parallel", "ToolCallError", "catalog", "call"})
# Soft keywords (match, case, type, _) are valid identifiers, so only hard keywords count.
_KEYWORDS = frozenset(keyword.kwlist)
_BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_"))
_TOOL_RESERVED = _KEYWORDS | _BUILTINS | _SDK_GLOBALS


def ident_for_tool(name: str) -> str:
    """The identifier a single tool name maps to, before collision handling."""
    ident = _NON_IDENT.sub("_", name)
    if not ident or ident[0].isdigit() or ident[0] == "_":
        ident = "t_" + ident
    if ident in _TOOL_RESERVED:
        ident += "_"
    return ident


def ident_for_property(key: str) -> str:
    """The identifier a single property key maps to, before collision handling."""
    ident = _NON_IDENT.sub("_", key)
    if not ident or ident[0].isdigit():
        ident = "p_" + ident
    if ident in _KEYWORDS:
        ident += "_"
    return ident


def tool_idents(names: Iterable[str]) -> dict[str, str]:
    """Map every tool name to a unique identifier (collisions resolved as documented)."""
    return _resolve(names, ident_for_tool)


def property_idents(keys: Iterable[str]) -> dict[str, str]:
    """Map every property key of one tool to a unique keyword-parameter identifier."""
    return _resolve(keys, ident_for_property)


def _resolve(originals: Iterable[str], one: Callable[[str], str]) -> dict[str, str]:
    ordered = sorted(set(originals))
    wanted = {original: one(original) for original in ordered}
    # Names that need no mapping own their identifier; mapped names yield to them.
    taken = {original for original in ordered if wanted[original] == original}
    result = {original: original for original in taken}
    for original in ordered:
        if original in result:
            continue
        ident = wanted[original]
        if ident in taken:
            n = 2
            while f"{ident}_{n}" in taken:
                n += 1
            ident = f"{ident}_{n}"
        taken.add(ident)
        result[original] = ident
    return result


def camel(ident: str) -> str:
    """``get_weather_v2`` -> ``GetWeatherV2``: the prefix of a tool's type names."""
    parts = [p for p in ident.split("_") if p]
    return "".join(p[:1].upper() + p[1:] for p in parts) or "Tool"
