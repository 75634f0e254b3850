"""Code mode: ``run_code``, each scope's SDK, and the runs themselves.

:class:`CodeMode` is the runtime's code-mode host: it builds a scope's ``run_code``
definition (its description embeds the scope's SDK), keeps SDKs cached by the set of
visible tools, warms the SDK generator in the background when tools change, and owns the
worker backend. One :class:`~ptc._run.ProgramRun` per ``run_code`` call does the rest.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import sdkgen
from worker import RunRequest, WorkerBackend

from ._body import BodyFailure
from ._events import logger
from ._json import JSON
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
from ._tools import Output, ToolContext, ToolDefinition, define_tool

if TYPE_CHECKING:
    from ._runtime import ToolRuntime
    from ._scopes import Scope

_CACHE_ENTRIES = 128
_NO_OUTPUT = "(run_code completed with no output)"


def render_run_code(value: JSON) -> list[ContentBlock]:
    """The captured output, then the result (a string as is, else JSON indented 2)."""
    parts: list[str] = []
    stdout = value.get("stdout", "") if isinstance(value, Mapping) else ""
    result = value.get("result") if isinstance(value, Mapping) else None
    if stdout:
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
    """The runtime's code-mode host (see the module docstring)."""

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime
        self._generator = sdkgen.SdkGenerator()
        # key -> (the definitions the key was made from, value): holding the definitions
        # keeps their ids from being reused while the entry lives.
        self._sdks: OrderedDict[tuple[Any, ...], tuple[tuple[ToolDefinition, ...], sdkgen.Sdk]]
        self._sdks = OrderedDict()
        self._tools: OrderedDict[tuple[Any, ...], ToolDefinition] = OrderedDict()
        self._lock = threading.Lock()
        self._warmer: ThreadPoolExecutor | None = None
        self._warmed: set[str] = set()
        self._backend: WorkerBackend | None = None
        self._owns_backend = False
        self._runs: set[ProgramRun] = set()
        self._closed = False

    # -- the runtime's hooks ----------------------------------------------------------

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
        definition = replace(
            define_tool(
                name=RUN_CODE,
                description=run_code_description(sdk.stub, profile, limits),
                input_schema=RUN_CODE_INPUT_SCHEMA,
                output=Output(RUN_CODE_OUTPUT_SCHEMA, render_run_code),
                execute=self._execute,
                concurrency_safe=False,
            ),
            cooperative_cancel=True,
        )
        with self._lock:
            self._tools[key] = definition
            _trim(self._tools)
        return definition

    def sdk(self, scope: Scope) -> str:
        _, profile, _ = scope.code_options()
        return self._sdk(_native_tools(scope), profile).stub

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

    # -- helpers ----------------------------------------------------------------------

    def backend(self) -> WorkerBackend:
        """The worker backend: the runtime's ``backend=`` or a lazily started subprocess one."""
        if self._backend is None:
            if self._runtime.backend is not None:
                self._backend = self._runtime.backend
            else:
                from worker import SubprocessBackend

                self._backend = SubprocessBackend(self._runtime.containment)
                self._owns_backend = True
        return self._backend

    def _code_mode_in_use(self, scope: Scope) -> bool:
        if self._runtime.default_mode != "native":
            return True
        return any(layer._mode not in (None, "native") for layer in scope._chain) or any(
            s._mode not in (None, "native") for s in _descendants(scope)
        )

    def _warm(self, specs: list[sdkgen.ToolSpec]) -> None:
        try:
            self._generator.prepare(specs)
        except Exception:
            logger.exception("warming the SDK generator failed (sdk() will retry on demand)")

    def _sdk(self, definitions: Sequence[ToolDefinition], profile: str) -> sdkgen.Sdk:
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
            _trim(self._sdks)
        return sdk

    async def _execute(self, arguments: JSON, context: ToolContext) -> Any:
        execution = context.execution
        scope = execution.scope
        _, profile, limits = scope.code_options()
        sdk = self._sdk(_native_tools(scope), profile)
        code: str = arguments["code"]
        problem = check_program(code, sdk, profile)
        if problem is not None:
            message = failure_message(problem.kind, problem.detail, "")
            meta = {"failure": {"kind": problem.kind, "detail": problem.detail}}
            raise BodyFailure("CODE_RUN_FAILED", message, meta)
        if self._closed:
            detail = "the runtime is closed"
            raise BodyFailure("CODE_RUN_FAILED", failure_message("abort", detail, ""))
        run = ProgramRun(execution, context.signal, limits)
        request = RunRequest(code=code, sdk_module=sdk.module, profile=profile, limits=limits)  # type: ignore[arg-type]
        self._runs.add(run)
        try:
            return await run.execute(self.backend(), request)
        finally:
            self._runs.discard(run)


def _native_tools(scope: Scope) -> tuple[ToolDefinition, ...]:
    return tuple(d for name, d in scope.view().visible.items() if name != RUN_CODE)


def _descendants(scope: Scope) -> list[Scope]:
    found: list[Scope] = []
    stack = list(scope._children.values())
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(child._children.values())
    return found


def _trim(cache: OrderedDict[Any, Any]) -> None:
    while len(cache) > _CACHE_ENTRIES:
        cache.popitem(last=False)
