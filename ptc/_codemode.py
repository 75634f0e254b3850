"""Code mode: ``run_code``, each scope's SDK, and the runs themselves.

:class:`CodeMode` is the runtime's code-mode host: it builds a scope's ``run_code``
definition (its description embeds the scope's SDK, and the SDK, profile and limits it was
built from are bound into its body), keeps SDKs cached by the set of visible tools, warms
the SDK generator in the background when tools change, and owns the worker backend. One
:class:`~ptc._run.ProgramRun` per ``run_code`` call does the rest.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import sdkgen
from worker import Containment, Limits, Profile, RunRequest, SubprocessBackend, WorkerBackend

from ._body import BodyFailure
from ._events import logger
from ._json import JSON, FrozenDict
from ._layers import Mode
from ._preflight import check_program
from ._prompt import (
    RUN_CODE,
    RUN_CODE_INPUT_SCHEMA,
    RUN_CODE_OUTPUT_SCHEMA,
    run_code_description,
    sdk_header,
)
from ._results import ContentBlock
from ._run import ProgramRun, failure_message
from ._scopes import Scope, subtree
from ._tools import Output, ToolContext, ToolDefinition, define_tool

__all__ = ("CodeMode", "render_run_code", "tool_spec")

_CACHE_ENTRIES = 128
_NO_OUTPUT = "(run_code completed with no output)"


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


def tool_spec(definition: ToolDefinition) -> sdkgen.ToolSpec:
    return sdkgen.ToolSpec(
        name=definition.name,
        description=definition.description,
        input_schema=definition.input_schema,
        output_schema=definition.output.schema,
    )


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
    ) -> None:
        self._default_mode = default_mode
        self._containment = containment
        self._backend = backend
        self._owns_backend = False
        self._generator = sdkgen.SdkGenerator()
        # key -> (the definitions the key was made from, value): holding the definitions
        # keeps their ids from being reused while the entry lives.
        self._sdks: OrderedDict[tuple[Any, ...], tuple[tuple[ToolDefinition, ...], sdkgen.Sdk]]
        self._sdks = OrderedDict()
        self._tools: OrderedDict[tuple[Any, ...], ToolDefinition] = OrderedDict()
        self._lock = threading.Lock()
        self._warmer: ThreadPoolExecutor | None = None
        self._warmed: set[str] = set()
        self._runs: set[ProgramRun] = set()
        self._closed = False

    # -- the scopes' hooks ------------------------------------------------------------

    def run_code_tool(self, scope: Scope, tools: Mapping[str, ToolDefinition]) -> ToolDefinition:
        _, profile, limits = scope.code_options()
        definitions = tuple(tools.values())
        key = (tuple(map(id, definitions)), profile, limits)
        with self._lock:
            cached = self._tools.get(key)
            if cached is not None:
                self._tools.move_to_end(key)
                return cached
        sdk = self._sdk(definitions, profile)

        async def execute(arguments: FrozenDict, context: ToolContext) -> Any:
            # The SDK, profile and limits this definition was built from, bound here.
            return await self._execute(sdk, profile, limits, arguments, context)

        definition = replace(
            define_tool(
                name=RUN_CODE,
                description=run_code_description(sdk.stub, profile, limits),
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
            self._tools[key] = definition
            _trim(self._tools, _CACHE_ENTRIES)
        return definition

    def sdk(self, scope: Scope) -> str:
        _, profile, _ = scope.code_options()
        return self._sdk(_native_tools(scope), profile).stub

    # -- the runtime's hooks ----------------------------------------------------------

    def on_change(self, scope: Scope) -> None:
        if self._closed or not self._code_mode_in_use(scope):
            return
        specs = [tool_spec(d) for d in _native_tools(scope)]
        fresh = [s for s in specs if sdkgen.spec_digest(s) not in self._warmed]
        if not fresh:
            return
        self._warmed.update(sdkgen.spec_digest(s) for s in fresh)
        if self._warmer is None:
            self._warmer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ptc-sdkgen")
        # Generation is slow (datamodel-code-generator): do it off the event loop, ahead of use.
        self._warmer.submit(self._warm, fresh)

    async def aclose(self) -> None:
        self._closed = True
        for run in list(self._runs):
            run.abort("the runtime closed during the run")
        if self._warmer is not None:
            self._warmer.shutdown(wait=False, cancel_futures=True)
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
        chain: list[Scope] = []
        current: Scope | None = scope
        while current is not None:
            chain.append(current)
            current = current.parent
        return any(s.declared_mode not in (None, "native") for s in chain + subtree(scope))

    def _warm(self, specs: list[sdkgen.ToolSpec]) -> None:
        try:
            self._generator.prepare(specs)
        except Exception:
            logger.exception("warming the SDK generator failed (sdk() will retry on demand)")

    def _sdk(self, definitions: Sequence[ToolDefinition], profile: Profile) -> sdkgen.Sdk:
        key = (tuple(map(id, definitions)), profile)
        with self._lock:
            cached = self._sdks.get(key)
            if cached is not None:
                self._sdks.move_to_end(key)
                return cached[1]
        specs = [tool_spec(d) for d in definitions]
        sdk = self._generator.generate(specs, header=sdk_header(profile))
        with self._lock:
            self._sdks[key] = (tuple(definitions), sdk)
            _trim(self._sdks, _CACHE_ENTRIES)
        return sdk

    async def _execute(
        self,
        sdk: sdkgen.Sdk,
        profile: Profile,
        limits: Limits,
        arguments: FrozenDict,
        context: ToolContext,
    ) -> Any:
        code = arguments["code"]
        scope = context.execution.scope
        assert isinstance(code, str) and isinstance(scope, Scope)
        problem = check_program(code, sdk, profile)
        if problem is not None:
            message = failure_message(problem.kind, problem.detail, "")
            meta: dict[str, JSON] = {"failure": {"kind": problem.kind, "detail": problem.detail}}
            raise BodyFailure("CODE_RUN_FAILED", message, meta)
        if self._closed:
            detail = "the runtime is closed"
            raise BodyFailure("CODE_RUN_FAILED", failure_message("abort", detail, ""))
        run = ProgramRun(context.execution, scope, context.signal, limits)
        request = RunRequest(code=code, sdk_module=sdk.module, profile=profile, limits=limits)
        self._runs.add(run)
        try:
            return await run.execute(self.backend(), request)
        finally:
            self._runs.discard(run)


def _native_tools(scope: Scope) -> tuple[ToolDefinition, ...]:
    return tuple(d for name, d in scope.view().visible.items() if name != RUN_CODE)


def _trim(cache: OrderedDict[Any, Any], size: int) -> None:
    while len(cache) > size:
        cache.popitem(last=False)
