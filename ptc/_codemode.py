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
    Containment,
    Limits,
    Profile,
    RunRequest,
    SubprocessBackend,
    WorkerBackend,
    program_size_problem,
    timing_mark,
)

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
from ._run import ProgramRun, fail_run
from ._scopes import Scope, lineage, subtree
from ._sdks import SdkBuilder, default_cache_dir
from ._suspensions import Suspension, SuspensionStore
from ._tools import Output, ToolContext, ToolDefinition, define_tool

__all__ = ("CodeMode", "render_run_code")

_CACHE_ENTRIES = 128
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
            sdkgen.SdkGenerator(default_cache_dir(), out_of_process=True), sdk_header
        )
        # key -> (the definitions the key was made from, run_code): holding the
        # definitions keeps their ids from being reused while the entry lives.
        self._tools: OrderedDict[tuple[Any, ...], tuple[tuple[ToolDefinition, ...], ToolDefinition]]
        self._tools = OrderedDict()
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
        sdk = self._builder.ready(definitions, profile)
        key = (tuple(map(id, definitions)), profile, limits, sdk is not None)
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
                return await self._execute(bound, profile, limits, arguments, context, started)

            stub = sdk.stub
        else:

            async def execute(arguments: FrozenDict, context: ToolContext) -> Any:
                started = time.monotonic()  # waiting for the SDK counts against the wall clock
                self._check_suspended(arguments, context)
                _check_size(arguments)
                built: sdkgen.Sdk | None = None
                with anyio.move_on_after(limits.wall_seconds):
                    built = await self._builder.build_async(definitions, profile)
                if built is None:
                    fail_run(
                        "timeout", _timeout_detail(limits, "while the SDK was being generated")
                    )
                return await self._execute(built, profile, limits, arguments, context, started)

            stub = _PENDING_STUB
            self._builder.submit(definitions, profile)
        definition = replace(
            define_tool(
                name=RUN_CODE,
                description=run_code_description(stub, profile, limits),
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

    def sdk(self, scope: Scope) -> str:
        _, profile, _ = scope.code_options()
        return self._builder.build(_native_tools(scope), profile).stub

    def ensure_ready(self, scope: Scope) -> None:
        """Build the scope's SDK now (blocking) unless it is built already."""
        mode, profile, _ = scope.code_options()
        if mode != "native":
            self._builder.build(_native_tools(scope), profile)

    async def prepare(self, scope: Scope) -> None:
        """Wait, without blocking the event loop, until the scope's SDK is built."""
        mode, profile, _ = scope.code_options()
        if mode != "native":
            await self._builder.build_async(_native_tools(scope), profile)

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
                mode, profile, _ = scope.code_options()
                if mode != "native":
                    self._builder.submit(_native_tools(scope), profile)

    async def _execute(
        self,
        sdk: sdkgen.Sdk,
        profile: Profile,
        limits: Limits,
        arguments: FrozenDict,
        context: ToolContext,
        started: float,
    ) -> Any:
        timing_mark("enter")
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
        )
        request = RunRequest(code=code, sdk_module=sdk.module, profile=profile, limits=limits)
        self._runs.add(run)
        try:
            return await run.execute(self.backend(), request)
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
