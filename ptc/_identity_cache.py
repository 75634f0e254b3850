"""Values cached by the identity of the objects they were made from.

Several parts of code mode keep something computed from tool definitions (a definition's
spec for the SDK generator, its stub's estimated size, a scope's SDK request or catalog),
and definitions are immutable, so the object itself is the key. An :class:`IdentityCache`
is that cache, once: keyed by the ids of the source objects (and any hashable extra), it
holds the objects with the value, so no id is reused while its entry lives; bounded, least
recently used out first; safe from any thread (the SDK builder's threads use it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ("IdentityCache",)

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """At most ``max_entries`` values, each keyed by its source objects' identities."""

    def __init__(self, max_entries: int) -> None:
        self._max = max_entries
        self._entries: OrderedDict[Hashable, tuple[tuple[object, ...], V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sources: tuple[object, ...], extra: Hashable = None) -> V | None:
        """The value made from these very objects (and ``extra``), or ``None``."""
        key = (tuple(map(id, sources)), extra)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        return entry[1]

    def put(self, sources: tuple[object, ...], value: V, extra: Hashable = None) -> V:
        """Keep ``value`` (made from ``sources``) and return it; the least recently used
        entry goes when there are more than ``max_entries``."""
        key = (tuple(map(id, sources)), extra)
        with self._lock:
            self._entries[key] = (sources, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._entries)
