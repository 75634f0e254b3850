"""The tool catalog of a code-mode scope: search, names, summaries, the size estimate.

:class:`Catalog` holds what a program (``catalog.search``, ``tools.call``), pre-flight
and the host (``scope.search_tools``) need to know about the visible tools besides their
stubs: each tool's name, identifier and one-line summary, and a full-text index ranked by
BM25 over the identifier's parts (``get_weatherV2`` -> ``get weather v 2``), the
description and the parameter names.

The ranking is SQLite's FTS5 (``bm25()`` over the three columns, equally weighted; each
query word matches as a prefix, so ``forecast`` finds ``forecasts``) through the standard
library's ``sqlite3``: measured on the BFCL sample (``benchmarks/catalog_bench.py``) a
query of three content words of a tool's description finds it in the top 5 for 92% of
tools, as ``rank-bm25`` does and a little better than ``bm25s`` with a stemmer (Porter
stemming scored lower here too), while the index of 1,000 tools builds in a few
milliseconds and costs no import and no dependency. The index is built on first use
(off the event loop: the callers run it in a thread) and kept until the catalog is dropped.
"""

from __future__ import annotations

import difflib
import math
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from sdkgen import ToolBinding

from .._calls._tools import ToolDefinition
from .._errors import SearchUnavailable
from .._identity_cache import IdentityCache
from .._json import JSON

__all__ = (
    "Catalog",
    "CatalogEntry",
    "estimate_tokens",
    "ident_words",
    "summary",
)

SUMMARY_CHARS = 160
# The model-facing text's estimate: ~3.7 characters per o200k token for English prose and
# Python stubs alike (benchmarks/catalog_bench.py compares it with the real count).
CHARS_PER_TOKEN = 3.7
_WORD = re.compile(r"[A-Za-z]+|[0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])|([A-Z]+)([A-Z][a-z])")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_QUERY_WORD = re.compile(r"\w+", re.UNICODE)


def ident_words(name: str) -> list[str]:
    """The words of an identifier or tool name: ``fmp.incomeStatement_v2`` -> ``fmp income
    statement v 2``."""
    spaced = _CAMEL.sub(lambda m: f"{m[1] or m[3]} {m[2] or m[4]}", name)
    return [w.lower() for w in _WORD.findall(spaced)]


def summary(description: str) -> str:
    """The first sentence (or line) of a description, at most :data:`SUMMARY_CHARS` long."""
    text = " ".join(description.split())
    first = _SENTENCE_END.split(text, maxsplit=1)[0] if text else ""
    if len(first) > SUMMARY_CHARS:
        first = first[: SUMMARY_CHARS - 1].rstrip() + "…"
    return first


def estimate_tokens(text_chars: int, definitions: Sequence[ToolDefinition]) -> int:
    """An estimate of the o200k tokens of ``run_code``'s description when it embeds the stub
    of every tool in ``definitions`` (``text_chars``: the length of the rest), made from the
    definitions alone, so the choice it drives never depends on what is cached."""
    chars = text_chars + sum(map(_stub_chars, definitions))
    return math.ceil(chars / CHARS_PER_TOKEN)


_STUB_CHARS: IdentityCache[int] = IdentityCache(20_000)


def _stub_chars(definition: ToolDefinition) -> int:
    """About how many characters one tool's stub takes (cached per definition: they are
    immutable)."""
    hit = _STUB_CHARS.get((definition,))
    if hit is not None:
        return hit
    chars = len(definition.name) + len(definition.description) + 24
    properties = definition.input_schema.get("properties")
    if isinstance(properties, dict):
        for key, schema in properties.items():
            chars += 2 * len(key) + 16 + _schema_chars(schema)
    return _STUB_CHARS.put((definition,), chars)


def _schema_chars(schema: object) -> int:
    """What a property costs in a stub besides its name: its description, enum values and
    nested properties (their types and names), roughly."""
    if not isinstance(schema, dict):
        return 0
    chars = 0
    description = schema.get("description")
    if isinstance(description, str):
        chars += len(description)
    enum = schema.get("enum")
    if isinstance(enum, list):
        chars += sum(len(str(v)) + 4 for v in enum)
    for nested in ("properties", "$defs", "definitions"):
        inner = schema.get(nested)
        if isinstance(inner, dict):
            chars += sum(len(k) + 12 + _schema_chars(v) for k, v in inner.items())
    items = schema.get("items")
    if isinstance(items, dict):
        chars += _schema_chars(items)
    return chars


@dataclass(frozen=True, kw_only=True, slots=True)
class CatalogEntry:
    name: str
    ident: str
    summary: str

    def as_json(self) -> dict[str, JSON]:
        return {"name": self.name, "ident": self.ident, "summary": self.summary}


class Catalog:
    """The visible native tools of one SDK: names, identifiers, summaries and the index.

    Thread-safe; :meth:`search` builds the index on first use (call it off the loop)."""

    def __init__(
        self, definitions: Sequence[ToolDefinition], bindings: Sequence[ToolBinding]
    ) -> None:
        by_name = {d.name: d for d in definitions}
        self._entries: dict[str, CatalogEntry] = {}
        self._documents: list[tuple[str, str, str, str]] = []
        for binding in bindings:
            definition = by_name.get(binding.name)
            description = definition.description if definition is not None else ""
            self._entries[binding.name] = CatalogEntry(
                name=binding.name, ident=binding.ident, summary=summary(description)
            )
            words = dict.fromkeys(ident_words(binding.name) + ident_words(binding.ident))
            params = " ".join(w for p in binding.params for w in ident_words(p.key))
            self._documents.append((binding.name, " ".join(words), description, params))
        self._by_ident = {e.ident: e for e in self._entries.values()}
        self._lock = threading.Lock()
        self._index: sqlite3.Connection | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def entry(self, name_or_ident: str) -> CatalogEntry | None:
        """The tool with this original name, else this identifier, else ``None``."""
        return self._entries.get(name_or_ident) or self._by_ident.get(name_or_ident)

    def close_matches(self, word: str, n: int = 10) -> list[CatalogEntry]:
        """Up to ``n`` tools whose identifier or name is spelled like ``word``, closest first."""
        pool = {**{e.ident: e for e in self._entries.values()}, **self._entries}
        close = difflib.get_close_matches(word, list(pool), n=n * 2, cutoff=0.6)
        out: dict[str, CatalogEntry] = {}
        for key in close:
            out.setdefault(pool[key].name, pool[key])
        return list(out.values())[:n]

    def search(
        self, query: str, limit: int = 10, *, visible: frozenset[str] | None = None
    ) -> list[CatalogEntry]:
        """The tools that best match ``query`` (BM25, best first), at most ``limit``;
        ``visible``: only these names (tools hidden since the catalog was made)."""
        # Split as identifiers are (`get_weatherV2` -> get weather v 2); other scripts as is.
        words = [w for t in _QUERY_WORD.findall(query) for w in ident_words(t) or [t.lower()]]
        if not words or limit < 1:
            return []
        expression = " OR ".join('"' + w.replace('"', '""') + '"*' for w in dict.fromkeys(words))
        # Hidden tools are filtered after ranking: fetch enough rows to fill `limit` anyway.
        hidden = 0 if visible is None else sum(1 for n in self._entries if n not in visible)
        with self._lock:
            index = self._built()
            # Column weights: the identifier's words count double; the name column is
            # stored only (weight 0).
            rows = index.execute(
                "SELECT name FROM tools WHERE tools MATCH ? ORDER BY bm25(tools, 0, 1, 1, 1), "
                "name LIMIT ?",
                (expression, limit + hidden),
            ).fetchall()
        hits = [self._entries[row[0]] for row in rows]
        if visible is not None:
            hits = [h for h in hits if h.name in visible]
        return hits[:limit]

    def _built(self) -> sqlite3.Connection:
        if self._index is None:
            try:
                index = sqlite3.connect(":memory:", check_same_thread=False)
                index.execute(
                    "CREATE VIRTUAL TABLE tools USING fts5(name UNINDEXED, ident, description, "
                    "params, tokenize='unicode61')"
                )
            except sqlite3.OperationalError as exc:
                raise SearchUnavailable(
                    f"tool search needs SQLite's FTS5, which this Python lacks ({exc})"
                ) from exc
            index.executemany("INSERT INTO tools VALUES (?, ?, ?, ?)", self._documents)
            self._index = index
        return self._index
