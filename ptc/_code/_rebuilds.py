"""Debounced SDK rebuilds: a tool change marks scopes dirty, a flush hands their new tool sets
to the builder.

Registering many tools one by one should cost about what registering them at once costs:
a change only marks its scope dirty, and a flush on the event loop, once no change came for
``_DEBOUNCE_S`` (and at most ``_DEBOUNCE_MAX_S`` after the first), snapshots the dirty
scopes' subtrees; the debounce thread then submits the SDKs they need to the background
builder (so a builder thread that is not running yet starts there: a thread's start waits
for the new thread to run, which the event loop should not). Without an event loop there
is nothing to protect: the flush and the submits run at once.
"""

from __future__ import annotations

import threading
import time
import weakref

import anyio
import anyio.from_thread
import anyio.lowlevel

from .._calls._tools import ToolDefinition
from .._scopes._layers import Mode
from .._scopes._scope import Scope
from ._discovery import ScopeSdks, native_tools
from ._sdks import SdkRequest

__all__ = ("Rebuilds",)

# A flush waits until no change came for this long (and at most _DEBOUNCE_MAX_S).
_DEBOUNCE_S = 0.005
_DEBOUNCE_MAX_S = 0.25


class Rebuilds:
    """The pending rebuilds of one runtime's SDKs (``default_mode``: the runtime's)."""

    def __init__(self, sdks: ScopeSdks, default_mode: Mode) -> None:
        self._sdks = sdks
        self._default_mode = default_mode
        self._dirty: weakref.WeakSet[Scope] = weakref.WeakSet()
        self._flush_pending = False
        self._last_change = 0.0

    def on_change(self, scope: Scope) -> None:
        """Mark ``scope`` dirty (if code mode is in use around it) and schedule a flush."""
        if not self._code_mode_in_use(scope):
            return
        self._dirty.add(scope)
        self._last_change = time.monotonic()
        if self._flush_pending:
            return
        try:
            token = anyio.lowlevel.current_token()
        except RuntimeError:
            # No event loop to protect: snapshot now, build in the background.
            self._sdks.builder.warm(self._flush())
            return
        self._flush_pending = True
        thread = threading.Thread(
            target=self._debounce, args=(token,), name="ptc-sdk-debounce", daemon=True
        )
        thread.start()

    def _code_mode_in_use(self, scope: Scope) -> bool:
        if self._default_mode != "native":
            return True
        related = (*scope.lineage, *_subtree(scope))
        return any(s.declared_mode not in (None, "native") for s in related)

    def _debounce(self, token: anyio.lowlevel.EventLoopToken) -> None:
        started = time.monotonic()
        while True:
            quiet = time.monotonic() - self._last_change
            if quiet >= _DEBOUNCE_S or time.monotonic() - started >= _DEBOUNCE_MAX_S:
                break
            time.sleep(_DEBOUNCE_S - quiet)
        try:
            batches = anyio.from_thread.run_sync(self._flush, token=token)
        except RuntimeError:  # the event loop is gone: nothing left to prepare for
            self._flush_pending = False
            return
        self._sdks.builder.warm(batches)

    def _flush(self) -> list[tuple[tuple[ToolDefinition, ...], SdkRequest]]:
        """On the event loop: snapshot the dirty scopes' tool sets and the SDKs they need
        (the caller hands them to the builder)."""
        self._flush_pending = False
        dirty, self._dirty = list(self._dirty), weakref.WeakSet()
        seen: set[int] = set()
        batches = []
        for changed in dirty:
            for scope in _subtree(changed):
                if id(scope) in seen or scope.closed:
                    continue
                seen.add(id(scope))
                mode, _, _ = scope.code_options()
                if mode != "native":
                    definitions = native_tools(scope)
                    requests = self._sdks.requests_of(scope, definitions)
                    batches += [(definitions, request) for request in requests]
        return batches


def _subtree(scope: Scope) -> list[Scope]:
    """``scope`` and all its open descendants."""
    found = [scope]
    index = 0
    while index < len(found):
        found.extend(found[index].children)
        index += 1
    return found
