"""SdkGenerator: per-tool fragments cached by spec digest, assembled into an :class:`Sdk`.

Fragment generation (datamodel-code-generator, tens of ms per tool, ~1 s for the first
call in a process) happens in :meth:`SdkGenerator.prepare`, which ``ptc`` calls from a
background thread when tools are registered. :meth:`SdkGenerator.generate` only assembles
when every fragment is warm; on a cold cache it generates what is missing, blocking.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import json
import os
import tempfile
import threading
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path

from ._fragment_check import checked_fragment
from ._idents import camel, ident_for_tool, tool_idents
from ._ir import ToolIR, tool_ir
from ._render import render_module, render_stub
from ._typegen import JSON_ALIAS, TypeFragment, build_fragment, rename_prefix
from ._types import Sdk, ToolSpec

# Bump when fragment generation changes, so stale disk caches are ignored.
_FRAGMENT_VERSION = "2"
# Names a type may never take in the stub: its prelude and what annotations use.
_RESERVED_TYPE_NAMES = (
    frozenset({JSON_ALIAS, "ToolCallError", "tools", "parallel"})
    | frozenset(n for n in dir(typing) if not n.startswith("_"))
    | frozenset(n for n in dir(builtins) if not n.startswith("_"))
)


def _base_prefix(name: str) -> str:
    prefix = base = camel(ident_for_tool(name))
    n = 2
    while prefix in _RESERVED_TYPE_NAMES:
        prefix, n = f"{base}{n}", n + 1
    return prefix


def _swap(type_name: str, old: str, new: str) -> str:
    return new + type_name[len(old) :]


def spec_digest(spec: ToolSpec) -> str:
    """sha256 of a spec's canonical JSON (what a fragment depends on, besides its prefix).

    Raises ``ValueError`` for a schema too deeply nested to serialise."""
    try:
        canonical = json.dumps(
            {
                "v": _FRAGMENT_VERSION,
                "input": spec.input_schema,
                "output": spec.output_schema,
            },
            sort_keys=True,
            ensure_ascii=True,
            separators=(",", ":"),
        )
    except RecursionError:
        raise ValueError(f"tool {spec.name!r}: schema nested too deeply") from None
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class SdkGenerator:
    """Generates SDKs; thread-safe. ``cache_dir`` (optional) persists fragments on disk."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir
        self._fragments: dict[tuple[str, str], TypeFragment] = {}
        self._lock = threading.Lock()

    def prepare(self, specs: Iterable[ToolSpec]) -> None:
        """Warm the fragments of ``specs`` (as each tool would be named on its own)."""
        for spec in specs:
            self._fragment(spec, _base_prefix(spec.name))

    def generate(self, specs: Sequence[ToolSpec], *, header: str = "") -> Sdk:
        """Assemble the SDK of ``specs`` (sorted by tool name; byte-stable)."""
        by_name: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in by_name:
                raise ValueError(f"duplicate tool name {spec.name!r}")
            by_name[spec.name] = spec
        idents = tool_idents(by_name)
        ordered = sorted(by_name)
        irs = self._assemble([by_name[n] for n in ordered], [idents[n] for n in ordered])
        stub = render_stub(irs, header)
        module = render_module(irs)
        digest = hashlib.sha256((stub + module).encode("utf-8", "surrogatepass")).hexdigest()
        return Sdk(stub=stub, module=module, digest=digest, tools=tuple(ir.binding() for ir in irs))

    def _assemble(self, specs: list[ToolSpec], idents: list[str]) -> list[ToolIR]:
        # Every type name must be unique across tools and differ from every tool ident
        # (a class-body name shadows a type for mypy). A fragment's prefix depends only on
        # its own tool name, so prepare() warms exactly what is needed here; on a clash the
        # later tool's type names are renamed (Search -> Search2) without regenerating.
        reserved = _RESERVED_TYPE_NAMES | set(idents)
        used: set[str] = set()
        irs = []
        for spec, ident in zip(specs, idents, strict=True):
            base = _base_prefix(spec.name)
            fragment = self._fragment(spec, base)
            prefix, n = base, 2
            while prefix in used or {_swap(t, base, prefix) for t in fragment.type_names} & (
                used | reserved
            ):
                prefix, n = f"{base}{n}", n + 1
            if prefix != base:
                fragment = rename_prefix(fragment, base, prefix)
            used |= {prefix, *fragment.type_names}
            irs.append(tool_ir(spec, ident, fragment))
        return irs

    def _fragment(self, spec: ToolSpec, prefix: str) -> TypeFragment:
        key = (spec_digest(spec), prefix)
        with self._lock:
            cached = self._fragments.get(key)
        if cached is not None:
            return cached
        fragment = self._load(key)
        if fragment is None:
            fragment = build_fragment(spec.input_schema, spec.output_schema, prefix)
            self._store(key, fragment)
        with self._lock:
            self._fragments[key] = fragment
        return fragment

    def _path(self, key: tuple[str, str]) -> Path | None:
        if self._cache_dir is None:
            return None
        return self._cache_dir / f"{key[0]}-{key[1]}.json"

    def _load(self, key: tuple[str, str]) -> TypeFragment | None:
        path = self._path(key)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None  # absent or unreadable: regenerate (and overwrite)
        # The file is outside this process: only the exact shape generation produces is
        # used (its annotations become the worker module's signatures); anything else
        # is regenerated and overwritten.
        return checked_fragment(data)

    def _store(self, key: tuple[str, str], fragment: TypeFragment) -> None:
        path = self._path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write-then-rename so a concurrent reader never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(dataclasses.asdict(fragment), f, sort_keys=True)
        os.replace(tmp, path)


_default = SdkGenerator()


def generate(specs: Sequence[ToolSpec], *, header: str = "") -> Sdk:
    """Generate with the module-level default generator (in-memory cache)."""
    return _default.generate(specs, header=header)
