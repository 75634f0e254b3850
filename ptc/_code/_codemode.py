"""Code mode: ``run_code`` per scope, and the runs themselves.

:class:`CodeMode` is the runtime's code-mode host. It builds a scope's ``run_code``
definition: once the scope's SDK is built, the description embeds it and the SDK, profile
and limits are bound into the body; until then a *pending* definition (same schema) waits
for the SDK off the event loop when called. Which SDK that is, and how the model finds the
rest, is discovery's (:class:`~ptc._code._discovery.ScopeSdks`); SDKs are built on a background
thread (:class:`~ptc._code._sdks.SdkBuilder`) after a debounced flush
(:class:`~ptc._code._rebuilds.Rebuilds`); paused runs are :class:`~ptc._code._pauses.Pauses`'. One
:class:`~ptc._code._run.ProgramRun` per ``run_code`` call does the rest, its host operations
answered by :class:`~ptc._code._host_operations.CatalogOperations`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import anyio
import anyio.to_thread

import sdkgen
from worker import (
    Containment,
    Limits,
    RunRequest,
    SubprocessBackend,
    WorkerBackend,
    program_size_problem,
    timing_mark,
)

from .._calls._decisions import ApprovalAnswer
from .._calls._tools import RUN_CODE, Output, ToolContext, ToolDefinition, define_tool
from .._json import JSON, FrozenDict
from .._results import ToolResult
from .._schema import compile_schema
from .._scopes._layers import Mode
from .._scopes._scope import Scope
from .._sessions._session_runs import take_session_call
from .._suspend._suspensions import Suspension, SuspensionStore
from ._discovery import ScopeSdks
from ._host_operations import CatalogOperations
from ._pauses import Pauses
from ._preflight import PreflightError, check_program
from ._prompt import (
    RUN_CODE_INPUT_SCHEMA,
    RUN_CODE_OUTPUT_SCHEMA,
    render_run_code,
    run_code_description,
    sdk_header,
)
from ._rebuilds import Rebuilds
from ._replay import RunSuspended
from ._run import ProgramRun, fail_run
from ._sdks import SdkBuilder, SdkRequest, default_cache_dir

__all__ = ("CodeMode",)

_CACHE_ENTRIES = 128
# Programs up to this size (python profile) are pre-flighted on the event loop: parsing and
# compiling them takes well under a millisecond here, less than a hop to a worker thread.
_INLINE_PREFLIGHT_CHARS = 256
_PENDING_STUB = (
    "# The SDK of this scope is being generated; call scope.sdk() or await scope.prepare().\n"
)


# run_code's schemas are constants: checked (and their validators cached) at import rather
# than by the first view of a code-mode scope, on the host's event loop (~1 ms each here).
compile_schema(RUN_CODE_INPUT_SCHEMA, "run_code: input_schema")
compile_schema(RUN_CODE_OUTPUT_SCHEMA, "run_code: output.schema")


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
        self._pauses = Pauses(suspensions)
        self._containment = containment
        self._backend = backend
        self._owns_backend = False
        self._builder = SdkBuilder(
            sdkgen.SdkGenerator(default_cache_dir(), out_of_process=True, frozen_specs=True),
            sdk_header,
        )
        self._sdks = ScopeSdks(self._builder)
        self._rebuilds = Rebuilds(self._sdks, default_mode)
        # key -> (the definitions the key was made from, run_code): holding the
        # definitions keeps their ids from being reused while the entry lives.
        self._tools: OrderedDict[tuple[Any, ...], tuple[tuple[ToolDefinition, ...], ToolDefinition]]
        self._tools = OrderedDict()
        self._lock = threading.Lock()
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
        request = self._sdks.request(scope, definitions)
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
                self._pauses.check(arguments, context)
                return await self._execute(
                    bound, definitions, request, limits, arguments, context, started
                )

            stub = sdk.stub
        else:

            async def execute(arguments: FrozenDict, context: ToolContext) -> Any:
                started = time.monotonic()  # waiting for the SDK counts against the wall clock
                self._pauses.check(arguments, context)
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

    def sdk(self, scope: Scope, tools: frozenset[str] | None = None) -> str:
        return self._sdks.sdk(scope, tools)

    async def sdk_async(self, scope: Scope, tools: frozenset[str] | None = None) -> str:
        return await self._sdks.sdk_async(scope, tools)

    def search_tools(self, scope: Scope, query: str, limit: int) -> list[dict[str, JSON]]:
        return self._sdks.search_tools(scope, query, limit)

    def ensure_ready(self, scope: Scope) -> None:
        """Build the scope's SDK now (blocking) unless it is built already."""
        self._sdks.ensure_ready(scope)

    async def prepare(self, scope: Scope) -> None:
        """Wait, without blocking the event loop, until the scope's SDK is built (see
        :meth:`ScopeSdks.prepare <ptc._code._discovery.ScopeSdks.prepare>`)."""
        await self._sdks.prepare(scope)

    def suspension(self, scope: Scope, call_id: str) -> Suspension | None:
        """The live suspension of the ``run_code`` call ``call_id`` in ``scope``."""
        return self._pauses.find(scope.path, call_id)

    async def discard(self, scope: Scope, key: str) -> Suspension:
        """Drop a suspended run without resuming it (by call id or token)."""
        return await self._pauses.take(scope.path, key)

    async def resume(self, scope: Scope, token: str, answer: ApprovalAnswer) -> ToolResult:
        """Run a suspended program again in a fresh worker (see ``Scope.resume``)."""
        return await self._pauses.resume(scope, token, answer)

    # -- the runtime's hooks ----------------------------------------------------------

    def on_change(self, scope: Scope) -> None:
        """Mark ``scope`` dirty; a debounced flush hands the new tool sets to the builder."""
        if not self._closed:
            self._rebuilds.on_change(scope)

    async def aclose(self) -> None:
        self._closed = True
        self._pauses.close()
        for run in list(self._runs):
            run.abort("the runtime closed during the run")
        await anyio.to_thread.run_sync(self._builder.close)  # stops the generation helper
        backend, self._backend = self._backend, None
        if backend is not None and self._owns_backend:
            await backend.aclose()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the runs ---------------------------------------------------------------------

    def backend(self) -> WorkerBackend:
        """The worker backend: the runtime's ``backend=`` or a lazily started subprocess one."""
        if self._backend is None:
            self._backend = SubprocessBackend(self._containment)
            self._owns_backend = True
        return self._backend

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
        session = take_session_call()  # this body's session, if run_code was a Session's
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
        replay = self._pauses.replay_for(code)
        turn = None
        if session is not None:  # SESSION_EXPIRED when it is gone or its state refused
            expect = replay.session_version if replay is not None else None
            turn = await session.keeper.begin(
                profile=profile, reset=session.reset, expect_version=expect
            )
        execution = context.execution
        run = ProgramRun(
            execution,
            scope,
            context.signal,
            limits,
            replay,
            started=started,
            host_operations=CatalogOperations(self._sdks, scope, definitions, sdk, request),
            session=turn,
        )
        run_request = RunRequest(
            code=code,
            sdk_module=sdk.module,
            profile=profile,
            limits=limits,
            session=turn.state if turn is not None else None,
        )
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
                replay.resumes if replay is not None else 0,
                session=(turn.session_id, turn.version) if turn is not None else None,
            ) from None
        finally:
            self._runs.discard(run)


def _check_size(arguments: FrozenDict) -> None:
    """The program size limit, checked before anything else looks at the program."""
    code = arguments.get("code")
    problem = program_size_problem(code) if isinstance(code, str) else None
    if problem is not None:
        fail_run("preflight", problem)


def _timeout_detail(limits: Limits, when: str) -> str:
    return f"wall clock limit of {limits.wall_seconds:g} s exceeded {when}"
