"""A run's host operations: ``catalog.search`` and ``catalog.describe`` answered by the host.

A program sends them as calls of the reserved names ``catalog:search`` /
``catalog:describe`` (their arguments checked by the worker protocol); the run hands them
to its :class:`CatalogOperations`, which answers from the catalog of the run's SDK without
the pipeline, never showing a tool the scope no longer sees (checked per operation).
"""

from __future__ import annotations

import anyio
import anyio.to_thread

import sdkgen
from worker import CallReply, CallRequest

from .._calls._tools import ToolDefinition
from .._errors import SearchUnavailable
from .._scopes._scope import Scope
from ._catalog import Catalog, CatalogEntry
from ._discovery import ScopeSdks, native_names
from ._run import HostOperations
from ._sdks import SdkRequest

__all__ = ("CatalogOperations",)


class CatalogOperations(HostOperations):
    """``catalog.search`` / ``catalog.describe`` of one run: answered from the catalog of
    the run's SDK, never showing a tool the scope no longer sees (checked per operation)."""

    def __init__(
        self,
        sdks: ScopeSdks,
        scope: Scope,
        definitions: tuple[ToolDefinition, ...],
        sdk: sdkgen.Sdk,
        request: SdkRequest,
    ) -> None:
        self._sdks = sdks
        self._scope = scope
        self._definitions = definitions
        self._sdk = sdk
        self._request = request

    async def answer(self, call: CallRequest) -> CallReply:
        visible = frozenset(native_names(self._scope))
        catalog = self._sdks.catalog(self._definitions, self._sdk)
        arguments = call.arguments
        if call.tool == "catalog:search":
            query, limit = arguments["query"], arguments["limit"]
            assert isinstance(query, str) and isinstance(limit, int)  # checked by the frame
            try:
                hits = await anyio.to_thread.run_sync(
                    lambda: catalog.search(query, limit, visible=visible), abandon_on_cancel=True
                )
            except SearchUnavailable as exc:  # the program reads it as a failed call
                return CallReply.failure("TOOL_UNAVAILABLE", str(exc))
            return CallReply.success([hit.as_json() for hit in hits])
        idents = arguments["idents"]
        assert isinstance(idents, list)
        found: list[CatalogEntry] = []
        for ident in idents:
            assert isinstance(ident, str)
            entry = catalog.entry(ident)
            if entry is None or entry.name not in visible:
                return CallReply.failure("UNKNOWN_TOOL", _unknown(ident, catalog, visible))
            found.append(entry)
        names = frozenset(e.name for e in found)
        full = SdkRequest(self._request.profile)
        stub = await anyio.to_thread.run_sync(
            self._sdks.describe, self._definitions, full, names, abandon_on_cancel=True
        )
        return CallReply.success(stub)


def _unknown(ident: str, catalog: Catalog, visible: frozenset[str]) -> str:
    close = [e.ident for e in catalog.close_matches(ident, 5) if e.name in visible]
    hint = f"; close: {', '.join(close)}" if close else ""
    return f"no visible tool {ident!r}{hint}; find tools with catalog.search('what it does')"
