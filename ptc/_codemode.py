"""Code mode: ``run_code``, each scope's SDK, and the runs themselves.

:class:`CodeMode` is the runtime's code-mode host. It builds a scope's ``run_code``
definition: once the scope's SDK is built, the description embeds it and the SDK, profile
and limits are bound into the body; until then a *pending* definition (same schema) waits
for the SDK off the event loop when called. SDKs are built on a background thread
(:class:`~ptc._sdks.SdkBuilder`): a tool change only marks scopes dirty, and a debounced
flush (on the event loop) hands their new tool sets to the builder, so registering many
tools one by one costs about what registering them at once costs. One
:class:`~ptc._run.ProgramRun` per ``run_code`` call does the rest.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

import sdkgen
from worker import (
    CallReply,
    CallRequest,
    Containment,
    Limits,
    RunRequest,
    SubprocessBackend,
    WorkerBackend,
    program_size_problem,
    timing_mark,
)

from ._catalog import Catalog, CatalogEntry, estimate_tokens
from ._decisions import ApprovalAnswer
from ._errors import ClosedError, UsageError
from ._json import JSON, FrozenDict
from ._layers import Mode
from ._pauses import Pauses
from ._preflight import PreflightError, check_program
from ._prompt import (
    RUN_CODE,
    RUN_CODE_INPUT_SCHEMA,
    RUN_CODE_OUTPUT_SCHEMA,
    run_code_description,
    sdk_header,
)
from ._replay import Replay, RunSuspended
from ._results import ContentBlock, ToolResult
from ._run import HostOperations, ProgramRun, fail_run
from ._scopes import Scope, lineage, subtree
from ._sdks import SdkBuilder, SdkRequest, default_cache_dir
from ._suspensions import Suspension, SuspensionStore
from ._tools import Output, ToolContext, ToolDefinition, define_tool

__all__ = ("CodeMode", "render_run_code")

_CACHE_ENTRIES = 128
_CATALOG_ENTRIES = 16
# Programs up to this size (python profile) are pre-flighted on the event loop: parsing and
# compiling them takes well under a millisecond here, less than a hop to a worker thread.
_INLINE_PREFLIGHT_CHARS = 256
_NO_OUTPUT = "(run_code completed with no output)"
_PENDING_STUB = (
    "# The SDK of this scope is being generated; call scope.sdk() or await scope.prepare().\n"
)
# A flush waits until no change came for this long (and at most _DEBOUNCE_MAX_S).
_DEBOUNCE_S = 0.005
_DEBOUNCE_MAX_S = 0.25
_RESUME_ANSWERS: tuple[ApprovalAnswer, ...] = ("allowed-once", "rejected", "cancelled")
# The replay a resumed run_code body picks up: set around the resumed call, consumed by it.
_REPLAY: contextvars.ContextVar[tuple[str, Replay] | None] = contextvars.ContextVar(
    "ptc_replay", default=None
)


def render_run_code(value: JSON) -> list[ContentBlock]:
    """The captured output, then the result (a string as is, else JSON indented 2)."""
    parts: list[str] = []
    stdout = value.get("stdout", "") if isinstance(value, Mapping) else ""
    result = value.get("result") if isinstance(value, Mapping) else None
    if isinstance(stdout, str) and stdout:
        parts.append(stdout.rstrip("\n"))
    if result is not None:
        parts.append(result if isinstance(result, str) else json.dumps(result, indent=2))
    text = "\n".join(parts)
    return [{"type": "text", "text": text or _NO_OUTPUT}]


class CodeMode:
    """The runtime's code-mode host (see the module docstring).

    ``backend``: the worker backend to run programs with; ``None`` starts a
    :class:`worker.SubprocessBackend` with ``containment`` on first use (and closes it).
    """

    def __init__(
        self,
        *,
        default_mode: Mode,
        backend: WorkerBackend | None,
        containment: Containment,
        suspensions: SuspensionStore,
    ) -> None:
        self._default_mode = default_mode
        self._pauses = Pauses(suspensions)
        self._containment = containment
        self._backend = backend
        self._owns_backend = False
        self._builder = SdkBuilder(
            sdkgen.SdkGenerator(default_cache_dir(), out_of_process=True, frozen_specs=True),
            sdk_header,
        )
        # key -> (the definitions the key was made from, run_code): holding the
        # definitions keeps their ids from being reused while the entry lives.
        self._tools: OrderedDict[tuple[Any, ...], tuple[tuple[ToolDefinition, ...], ToolDefinition]]
        self._tools = OrderedDict()
        self._requests: OrderedDict[
            tuple[Any, ...], tuple[tuple[ToolDefinition, ...], SdkRequest]
        ] = OrderedDict()
        self._catalogs: OrderedDict[
            tuple[int, ...], tuple[tuple[ToolDefinition, ...], Catalog]
        ] = OrderedDict()
        self._lock = threading.Lock()
        self._dirty: weakref.WeakSet[Scope] = weakref.WeakSet()
        self._flush_pending = False
        self._last_change = 0.0
        self._runs: set[ProgramRun] = set()
        self._closed = False

    # -- the scopes' hooks ------------------------------------------------------------

    @property
    def revision(self) -> int:
        """Bumped whenever an SDK finishes building (views built from a pending one refresh)."""
        return self._builder.revision

    def run_code_tool(self, scope: Scope, tools: Mapping[str, ToolDefinition]) -> ToolDefinition:
        _, profile, limits = scope.code_options()
        definitions = tuple(tools.values())
        request = self._request(scope, definitions)
        sdk = self._builder.ready(definitions, request)
        key = (tuple(map(id, definitions)), request, limits, sdk is not None)
        with self._lock:
            cached = self._tools.get(key)
            if cached is not None:
                self._tools.move_to_end(key)
                return cached[1]
        if sdk is not None:
            bound = sdk

            async def execute(arguments: FrozenDict, context: ToolContext) -> Any:
                # The SDK, profile and limits this definition was built from, bound here.
                started = time.monotonic()  # the wall clock runs from run_code entry
                self._check_suspended(arguments, context)
                return await self._execute(
                    bound, definitions, request, limits, arguments, context, started
                )

            stub = sdk.stub
        else:

            async def execute(arguments: FrozenDict, context: ToolContext) -> Any:
                started = time.monotonic()  # waiting for the SDK counts against the wall clock
                self._check_suspended(arguments, context)
                _check_size(arguments)
                built: sdkgen.Sdk | None = None
                with anyio.move_on_after(limits.wall_seconds):
                    built = await self._builder.build_async(definitions, request)
                if built is None:
                    fail_run(
                        "timeout", _timeout_detail(limits, "while the SDK was being generated")
                    )
                return await self._execute(
                    built, definitions, request, limits, arguments, context, started
                )

            stub = _PENDING_STUB
            self._builder.submit(definitions, request)
        shown = len(definitions) if request.described is None else len(request.described)
        definition = replace(
            define_tool(
                name=RUN_CODE,
                description=run_code_description(
                    stub, profile, limits, shown=shown, total=len(definitions)
                ),
                input_schema=RUN_CODE_INPUT_SCHEMA,
                output=Output(RUN_CODE_OUTPUT_SCHEMA, render_run_code),
                execute=execute,
                concurrency_safe=False,
                # No annotations: a program may call any visible tool, so MCP's
                # conservative defaults (not read-only, may be destructive) are the truth.
                title="Run code",
            ),
            cooperative_cancel=True,
        )
        with self._lock:
            self._tools[key] = (definitions, definition)
            while len(self._tools) > _CACHE_ENTRIES:
                self._tools.popitem(last=False)
        return definition

    def _request(self, scope: Scope, definitions: tuple[ToolDefinition, ...]) -> SdkRequest:
        """The SDK ``run_code``'s description needs: every tool's stub (inline discovery), or
        only the pinned ones' (search). ``auto`` decides by an estimate made from the
        definitions alone, so the choice never depends on what is cached."""
        _, profile, limits = scope.code_options()
        discovery = scope.discovery()
        key = (tuple(map(id, definitions)), profile, limits, discovery)
        with self._lock:
            cached = self._requests.get(key)
            if cached is not None:
                self._requests.move_to_end(key)
                return cached[1]
        inline = discovery.mode == "inline"
        if discovery.mode == "auto":
            text = run_code_description("", profile, limits, shown=1, total=1)
            inline = estimate_tokens(len(text), definitions) <= discovery.inline_tokens
        names = {d.name for d in definitions}
        described = None if inline else frozenset(n for n in discovery.pin if n in names)
        request = SdkRequest(profile, described)
        with self._lock:
            self._requests[key] = (definitions, request)
            while len(self._requests) > _CACHE_ENTRIES:
                self._requests.popitem(last=False)
        return request

    def catalog(self, definitions: tuple[ToolDefinition, ...], sdk: sdkgen.Sdk) -> Catalog:
        """The catalog of an SDK's tools (made once per tool set; its index on first search)."""
        key = tuple(map(id, definitions))
        with self._lock:
            cached = self._catalogs.get(key)
            if cached is not None:
                self._catalogs.move_to_end(key)
                return cached[1]
        made = Catalog(definitions, sdk.tools)
        with self._lock:
            self._catalogs[key] = (definitions, made)
            while len(self._catalogs) > _CATALOG_ENTRIES:
                self._catalogs.popitem(last=False)
        return made

    def describe(
        self, definitions: tuple[ToolDefinition, ...], request: SdkRequest, names: frozenset[str]
    ) -> str:
        """The model's stub of the tools ``names`` (``catalog.describe``; blocking)."""
        return self._builder.stub(definitions, request, names)

    def sdk(self, scope: Scope, tools: frozenset[str] | None = None) -> str:
        _, profile, _ = scope.code_options()
        definitions = _native_tools(scope)
        request = SdkRequest(profile, full=True)
        if tools is None:
            return self._builder.build(definitions, request).stub
        missing = sorted(tools - {d.name for d in definitions})
        if missing:
            catalog = self.catalog(definitions, self._ready_sdk(scope, definitions))
            hints = [
                f"{name!r} (close: {', '.join(e.name for e in catalog.close_matches(name, 3))})"
                if catalog.close_matches(name, 3)
                else repr(name)
                for name in missing
            ]
            raise UsageError(f"sdk(tools=...): not visible in {scope!r}: {', '.join(hints)}")
        return self._builder.stub(definitions, request, tools)

    def search_tools(self, scope: Scope, query: str, limit: int) -> list[dict[str, JSON]]:
        definitions = _native_tools(scope)
        catalog = self.catalog(definitions, self._ready_sdk(scope, definitions))
        return [hit.as_json() for hit in catalog.search(query, limit)]

    def _ready_sdk(self, scope: Scope, definitions: tuple[ToolDefinition, ...]) -> sdkgen.Sdk:
        return self._builder.build(definitions, self._request(scope, definitions))

    def ensure_ready(self, scope: Scope) -> None:
        """Build the scope's SDK now (blocking) unless it is built already."""
        mode, _, _ = scope.code_options()
        if mode != "native":
            self._ready_sdk(scope, _native_tools(scope))

    async def prepare(self, scope: Scope) -> None:
        """Wait, without blocking the event loop, until the SDK ``run_code``'s description
        needs is built; in inline discovery also the full one ``sdk()`` returns (the same
        types: it costs only its assembly). In search discovery the full one is built in
        the background, on a thread of its own, not waited for: it needs every tool's
        types, which search discovery exists to avoid waiting for."""
        mode, _, _ = scope.code_options()
        if mode != "native":
            definitions = _native_tools(scope)
            needed, full = self._requests_of(scope, definitions)
            await self._builder.build_async(definitions, needed)
            if needed.described is None:
                await self._builder.build_async(definitions, full)
            else:
                self._builder.submit(definitions, full)

    def _requests_of(
        self, scope: Scope, definitions: tuple[ToolDefinition, ...]
    ) -> tuple[SdkRequest, SdkRequest]:
        """The SDK the description needs, and the full one (see :meth:`prepare`)."""
        request = self._request(scope, definitions)
        return request, SdkRequest(request.profile, full=True)

    # -- the runtime's hooks ----------------------------------------------------------

    def on_change(self, scope: Scope) -> None:
        """Mark ``scope`` dirty; a debounced flush hands the new tool sets to the builder."""
        if self._closed or not self._code_mode_in_use(scope):
            return
        self._dirty.add(scope)
        self._last_change = time.monotonic()
        if self._flush_pending:
            return
        try:
            token = anyio.lowlevel.current_token()
        except RuntimeError:
            self._flush()  # no event loop to protect: snapshot now, build in the background
            return
        self._flush_pending = True
        thread = threading.Thread(
            target=self._debounce, args=(token,), name="ptc-sdk-debounce", daemon=True
        )
        thread.start()

    async def aclose(self) -> None:
        self._closed = True
        for run in list(self._runs):
            run.abort("the runtime closed during the run")
        await anyio.to_thread.run_sync(self._builder.close)  # stops the generation helper
        backend, self._backend = self._backend, None
        if backend is not None and self._owns_backend:
            await backend.aclose()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- helpers ----------------------------------------------------------------------

    def backend(self) -> WorkerBackend:
        """The worker backend: the runtime's ``backend=`` or a lazily started subprocess one."""
        if self._backend is None:
            self._backend = SubprocessBackend(self._containment)
            self._owns_backend = True
        return self._backend

    def _code_mode_in_use(self, scope: Scope) -> bool:
        if self._default_mode != "native":
            return True
        related = (*lineage(scope), *subtree(scope))
        return any(s.declared_mode not in (None, "native") for s in related)

    def _debounce(self, token: anyio.lowlevel.EventLoopToken) -> None:
        started = time.monotonic()
        while True:
            quiet = time.monotonic() - self._last_change
            if quiet >= _DEBOUNCE_S or time.monotonic() - started >= _DEBOUNCE_MAX_S:
                break
            time.sleep(_DEBOUNCE_S - quiet)
        try:
            anyio.from_thread.run_sync(self._flush, token=token)
        except RuntimeError:  # the event loop is gone: nothing left to prepare for
            self._flush_pending = False

    def _flush(self) -> None:
        """On the event loop: snapshot the dirty scopes' tool sets, hand them to the builder."""
        self._flush_pending = False
        dirty, self._dirty = list(self._dirty), weakref.WeakSet()
        seen: set[int] = set()
        for changed in dirty:
            for scope in subtree(changed):
                if id(scope) in seen or scope.closed:
                    continue
                seen.add(id(scope))
                mode, _, _ = scope.code_options()
                if mode != "native":
                    definitions = _native_tools(scope)
                    for request in self._requests_of(scope, definitions):
                        self._builder.submit(definitions, request)

    async def _execute(
        self,
        sdk: sdkgen.Sdk,
        definitions: tuple[ToolDefinition, ...],
        request: SdkRequest,
        limits: Limits,
        arguments: FrozenDict,
        context: ToolContext,
        started: float,
    ) -> Any:
        timing_mark("enter")
        profile = request.profile
        code = arguments["code"]
        scope = context.execution.scope
        assert isinstance(code, str) and isinstance(scope, Scope)
        _check_size(arguments)
        # Pre-flight parses (and, restricted, compiles) the program: off the event loop, and
        # within the wall clock (a thread cannot be stopped: at the deadline it is abandoned,
        # its work bounded by the program size limit).
        problem: PreflightError | None = None
        if profile == "python" and len(code) <= _INLINE_PREFLIGHT_CHARS:
            # A short program is checked in well under a millisecond: a thread hop would
            # cost more than the check (and the loop is not held long enough to matter).
            problem = check_program(code, sdk, profile)
        else:
            deadline = started + limits.wall_seconds
            with anyio.move_on_after(deadline - time.monotonic()) as wall:
                problem = await anyio.to_thread.run_sync(
                    check_program, code, sdk, profile, abandon_on_cancel=True
                )
            if wall.cancelled_caught:
                detail = _timeout_detail(limits, "during pre-flight (checking the program)")
                fail_run("timeout", detail)
        timing_mark("preflight")
        if problem is not None:
            fail_run(problem.kind, problem.detail)
        if self._closed:
            fail_run("abort", "the runtime is closed")
        replay = _REPLAY.get()
        _REPLAY.set(None)  # consumed: a nested run_code elsewhere starts afresh
        if replay is not None and replay[0] != code:
            replay = None  # not the program this replay was made for
        execution = context.execution
        run = ProgramRun(
            execution,
            scope,
            context.signal,
            limits,
            replay[1] if replay is not None else None,
            started=started,
            host_operations=_CatalogOperations(self, scope, definitions, sdk, request),
        )
        run_request = RunRequest(code=code, sdk_module=sdk.module, profile=profile, limits=limits)
        self._runs.add(run)
        try:
            return await run.execute(self.backend(), run_request)
        except RunSuspended as suspended:
            description = arguments.get("description")
            raise await self._pauses.record(
                scope.path,
                execution,
                code,
                description if isinstance(description, str) else None,
                suspended,
                replay[1].resumes if replay is not None else 0,
            ) from None
        finally:
            self._runs.discard(run)

    def _check_suspended(self, arguments: FrozenDict, context: ToolContext) -> None:
        """A ``run_code`` call whose call id paused this program in this scope (a framework
        calling its tool again on resume) gets the same ``SUSPENDED`` result: nothing runs."""
        scope = context.execution.scope
        if _REPLAY.get() is None and isinstance(scope, Scope):
            self._pauses.check(scope.path, context.execution.call_id, arguments)

    def suspension(self, scope: Scope, call_id: str) -> Suspension | None:
        """The live suspension of the ``run_code`` call ``call_id`` in ``scope``."""
        return self._pauses.find(scope.path, call_id)

    async def discard(self, scope: Scope, key: str) -> Suspension:
        """Drop a suspended run without resuming it (by call id or token)."""
        return await self._pauses.take(scope.path, key)

    async def resume(self, scope: Scope, token: str, answer: ApprovalAnswer) -> ToolResult:
        """Run a suspended program again in a fresh worker (see ``Scope.resume``)."""
        if answer not in _RESUME_ANSWERS:
            raise UsageError(f"answer must be one of {_RESUME_ANSWERS}, got {answer!r}")
        if self._closed:
            raise ClosedError("the runtime is closed")
        suspension = await self._pauses.take(scope.path, token)  # a call id names it too
        replay = Replay(
            calls=suspension.calls,
            pending=suspension.pending,
            answer=answer,
            resumes=suspension.resumes + 1,
        )
        arguments: dict[str, JSON] = {"code": suspension.code}
        if suspension.description:
            arguments["description"] = suspension.description
        reset = _REPLAY.set((suspension.code, replay))
        try:
            return await scope.call(RUN_CODE, arguments, call_id=suspension.call_id)
        finally:
            _REPLAY.reset(reset)


class _CatalogOperations(HostOperations):
    """``catalog.search`` / ``catalog.describe`` of one run: answered from the catalog of
    the run's SDK, never showing a tool the scope no longer sees (checked per operation)."""

    def __init__(
        self,
        code_mode: CodeMode,
        scope: Scope,
        definitions: tuple[ToolDefinition, ...],
        sdk: sdkgen.Sdk,
        request: SdkRequest,
    ) -> None:
        self._code_mode = code_mode
        self._scope = scope
        self._definitions = definitions
        self._sdk = sdk
        self._request = request

    async def answer(self, call: CallRequest) -> CallReply:
        visible = frozenset(_native_names(self._scope))
        catalog = self._code_mode.catalog(self._definitions, self._sdk)
        arguments = call.arguments
        if call.tool == "catalog:search":
            query, limit = arguments["query"], arguments["limit"]
            assert isinstance(query, str) and isinstance(limit, int)  # checked by the frame
            hits = await anyio.to_thread.run_sync(
                lambda: catalog.search(query, limit, visible=visible), abandon_on_cancel=True
            )
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
            self._code_mode.describe, self._definitions, full, names, abandon_on_cancel=True
        )
        return CallReply.success(stub)


def _unknown(ident: str, catalog: Catalog, visible: frozenset[str]) -> str:
    close = [e.ident for e in catalog.close_matches(ident, 5) if e.name in visible]
    hint = f"; close: {', '.join(close)}" if close else ""
    return f"no visible tool {ident!r}{hint}; find tools with catalog.search('what it does')"


def _native_names(scope: Scope) -> list[str]:
    return [name for name in scope.view().visible if name != RUN_CODE]


def _check_size(arguments: FrozenDict) -> None:
    """The program size limit, checked before anything else looks at the program."""
    code = arguments.get("code")
    problem = program_size_problem(code) if isinstance(code, str) else None
    if problem is not None:
        fail_run("preflight", problem)


def _timeout_detail(limits: Limits, when: str) -> str:
    return f"wall clock limit of {limits.wall_seconds:g} s exceeded {when}"


def _native_tools(scope: Scope) -> tuple[ToolDefinition, ...]:
    return tuple(d for name, d in scope.view().visible.items() if name != RUN_CODE)
