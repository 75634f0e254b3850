"""Discovery: which SDK a code-mode scope shows the model, and how the model finds the rest.

``run_code``'s description embeds either every visible tool's stub (inline discovery) or
only the pinned ones' (search discovery, the rest found with ``catalog.search``); ``auto``
decides by an estimate made from the definitions alone, so the choice never depends on
what is cached. :class:`ScopeSdks` makes that choice per scope and answers the host's
questions about a scope's tools: its full SDK or a subset of it (``scope.sdk(tools=...)``),
the catalog behind ``search_tools`` and ``catalog.search``, and the stubs
``catalog.describe`` returns.
"""

from __future__ import annotations

from typing import NoReturn

import sdkgen

from .._calls._tools import ToolDefinition
from .._errors import UsageError
from .._identity_cache import IdentityCache
from .._json import JSON
from .._scopes._scope import Scope
from ._catalog import Catalog, estimate_tokens
from ._prompt import RUN_CODE, run_code_description
from ._sdks import SdkBuilder, SdkRequest

__all__ = ("ScopeSdks", "native_names", "native_tools")

_REQUEST_ENTRIES = 128
_CATALOG_ENTRIES = 16


class ScopeSdks:
    """The SDKs of a runtime's scopes as discovery chooses them, built by ``builder``."""

    def __init__(self, builder: SdkBuilder) -> None:
        self.builder = builder
        self._requests: IdentityCache[SdkRequest] = IdentityCache(_REQUEST_ENTRIES)
        self._catalogs: IdentityCache[Catalog] = IdentityCache(_CATALOG_ENTRIES)

    def request(self, scope: Scope, definitions: tuple[ToolDefinition, ...]) -> SdkRequest:
        """The SDK ``run_code``'s description needs: every tool's stub (inline discovery), or
        only the pinned ones' (search). ``auto`` decides by an estimate made from the
        definitions alone, so the choice never depends on what is cached."""
        _, profile, limits = scope.code_options()
        discovery = scope.discovery()
        options = (profile, limits, discovery)
        cached = self._requests.get(definitions, options)
        if cached is not None:
            return cached
        inline = discovery.mode == "inline"
        if discovery.mode == "auto":
            text = run_code_description("", profile, limits, shown=1, total=1)
            inline = estimate_tokens(len(text), definitions) <= discovery.inline_tokens
        names = {d.name for d in definitions}
        described = None if inline else frozenset(n for n in discovery.pin if n in names)
        return self._requests.put(definitions, SdkRequest(profile, described), options)

    def requests_of(
        self, scope: Scope, definitions: tuple[ToolDefinition, ...]
    ) -> tuple[SdkRequest, SdkRequest]:
        """The SDK the description needs, and the full one (see :meth:`prepare`)."""
        request = self.request(scope, definitions)
        return request, SdkRequest(request.profile, full=True)

    def catalog(self, definitions: tuple[ToolDefinition, ...], sdk: sdkgen.Sdk) -> Catalog:
        """The catalog of an SDK's tools (made once per tool set; its index on first search)."""
        cached = self._catalogs.get(definitions)
        if cached is not None:
            return cached
        return self._catalogs.put(definitions, Catalog(definitions, sdk.tools))

    def describe(
        self, definitions: tuple[ToolDefinition, ...], request: SdkRequest, names: frozenset[str]
    ) -> str:
        """The model's stub of the tools ``names`` (``catalog.describe``; blocking: call it
        on a worker thread, never the event loop's)."""
        return self.builder.stub(definitions, request, names, background=True)

    def sdk(self, scope: Scope, tools: frozenset[str] | None = None) -> str:
        """The full SDK stub of the scope's visible tools, or of those named in ``tools``
        (built now if need be; a name the scope does not see is an error with close ones)."""
        _, profile, _ = scope.code_options()
        definitions = native_tools(scope)
        request = SdkRequest(profile, full=True)
        if tools is None:
            return self.builder.build(definitions, request).stub
        missing = sorted(tools - {d.name for d in definitions})
        if missing:
            self._not_visible(scope, definitions, missing, self._ready_sdk(scope, definitions))
        return self.builder.stub(definitions, request, tools)

    async def sdk_async(self, scope: Scope, tools: frozenset[str] | None = None) -> str:
        """:meth:`sdk`, waiting for the build (or generating the subset's stub) off the
        event loop."""
        _, profile, _ = scope.code_options()
        definitions = native_tools(scope)
        request = SdkRequest(profile, full=True)
        if tools is None:
            return (await self.builder.build_async(definitions, request)).stub
        missing = sorted(tools - {d.name for d in definitions})
        if missing:
            needed = self.request(scope, definitions)
            sdk = await self.builder.build_async(definitions, needed)
            self._not_visible(scope, definitions, missing, sdk)
        return await self.builder.stub_async(definitions, request, tools)

    def _not_visible(
        self,
        scope: Scope,
        definitions: tuple[ToolDefinition, ...],
        missing: list[str],
        sdk: sdkgen.Sdk,
    ) -> NoReturn:
        """Raise the error for names ``scope`` does not see, with close visible ones."""
        catalog = self.catalog(definitions, sdk)
        hints = [
            f"{name!r} (close: {', '.join(e.name for e in catalog.close_matches(name, 3))})"
            if catalog.close_matches(name, 3)
            else repr(name)
            for name in missing
        ]
        raise UsageError(f"sdk(tools=...): not visible in {scope!r}: {', '.join(hints)}")

    def search_tools(self, scope: Scope, query: str, limit: int) -> list[dict[str, JSON]]:
        """The scope's visible tools that best match ``query``, best first."""
        definitions = native_tools(scope)
        catalog = self.catalog(definitions, self._ready_sdk(scope, definitions))
        return [hit.as_json() for hit in catalog.search(query, limit)]

    def ensure_ready(self, scope: Scope) -> None:
        """Build the scope's SDK now (blocking) unless it is built already."""
        mode, _, _ = scope.code_options()
        if mode != "native":
            self._ready_sdk(scope, native_tools(scope))

    async def prepare(self, scope: Scope) -> None:
        """Wait, without blocking the event loop, until the SDK ``run_code``'s description
        needs is built (what ``model_tools()`` and ``run_code`` use); in inline discovery
        also the full one ``sdk()`` returns (the same types: it costs only its assembly).
        In search discovery the full one is only started, in the background on a thread of
        its own: it needs every tool's types, which search discovery exists to avoid
        waiting for (:meth:`sdk_async` waits for it)."""
        mode, _, _ = scope.code_options()
        if mode != "native":
            definitions = native_tools(scope)
            needed, full = self.requests_of(scope, definitions)
            await self.builder.build_async(definitions, needed)
            if needed.described is None:
                await self.builder.build_async(definitions, full)
            else:
                self.builder.submit(definitions, full)

    def _ready_sdk(self, scope: Scope, definitions: tuple[ToolDefinition, ...]) -> sdkgen.Sdk:
        return self.builder.build(definitions, self.request(scope, definitions))


def native_tools(scope: Scope) -> tuple[ToolDefinition, ...]:
    """The scope's visible tools but ``run_code``: the tools its SDK is made of."""
    return tuple(d for name, d in scope.view().visible.items() if name != RUN_CODE)


def native_names(scope: Scope) -> list[str]:
    """The names of :func:`native_tools`."""
    return [name for name in scope.view().visible if name != RUN_CODE]
