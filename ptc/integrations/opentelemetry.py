"""OpenTelemetry spans for every pipeline call: ``opentelemetry.instrument(runtime,
tracer_provider=provider)``.

Extra ``ptc[otel]``. One span per call, as the GenAI semantic conventions name a tool
execution: ``execute_tool {name}``, kind ``INTERNAL``, with ``gen_ai.operation.name =
"execute_tool"``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type =
"function"``, and, for a failed call, ``error.type`` (ptc's error code) and an error
status. The parent of a direct call's span is the current context where ``scope.call`` was
awaited (so the spans sit under the host's agent or framework span); the span is current
while the tool body runs (the body's own spans nest under it). A ``run_code`` span is the
parent of its program's nested calls, and carries the run's facts as ``ptc.*`` attributes:
``ptc.enforcement.<dimension>`` (full/partial/none), ``ptc.stats.wall_ms``, ``cpu_ms``,
``calls``, ``peak_memory_kib``, ``ptc.failure.kind``.

It is made of ordinary listeners (``tools/pre-execute`` opens the span, ``tools/execute``
makes it current around the body, ``tools/result`` ends it); instrument before registering
other listeners so the span covers theirs. A call refused before the waterfalls (unknown
tool, invalid arguments) gets a span too. ``instrument`` returns a disposer.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

import ptc

__all__ = ("instrument",)

_SCOPE = "ptc.integrations.opentelemetry"


def instrument(
    runtime: ptc.ToolRuntime,
    *,
    tracer_provider: TracerProvider | None = None,
    scope: ptc.Scope | None = None,
) -> ptc.Disposer:
    """Trace every call of ``runtime`` (or only of ``scope``'s subtree); the disposer stops."""
    if not isinstance(runtime, ptc.ToolRuntime):
        raise ptc.UsageError("instrument() takes a ptc.ToolRuntime")
    tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
    tracing = _Tracing(tracer)
    disposers = [
        runtime.on("tools/pre-execute", tracing.pre_execute, scope=scope),
        runtime.on("tools/execute", tracing.execute, scope=scope),
        runtime.on("tools/result", tracing.result, scope=scope),
    ]

    def stop() -> None:
        for dispose in disposers:
            dispose()

    return ptc.Disposer(stop)


class _Tracing:
    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer
        self._open: dict[str, Span] = {}

    async def pre_execute(
        self, execution: ptc.ToolExecution, nxt: Callable[[], Awaitable[Any]]
    ) -> Any:
        self._open[execution.call_id] = self._start(execution.call_id, execution.name)
        return await nxt()

    async def execute(self, execution: ptc.ToolExecution, nxt: ptc.ExecuteNext) -> ptc.ToolResult:
        span = self._open.get(execution.call_id)
        if span is None:
            return await nxt()
        with trace.use_span(span, end_on_exit=False):
            return await nxt()

    def result(self, result: ptc.ToolResult) -> None:
        span = self._open.pop(result.call_id, None)
        if span is None:  # refused before the waterfalls: a span all the same
            span = self._start(result.call_id, result.name)
        if result.name == ptc.RUN_CODE:
            _run_facts(span, result.meta)
            self._end_children(result.call_id)
        if result.error is not None:
            span.set_attribute("error.type", result.error.code)
            span.set_status(Status(StatusCode.ERROR, result.error.message[:1000]))
        span.end()

    def _start(self, call_id: str, name: str) -> Span:
        outer, nested, _ = call_id.rpartition(":ptc:")
        parent_span = self._open.get(outer) if nested else None
        if parent_span is not None:  # a program's call: a child of its run_code span
            parent = trace.set_span_in_context(parent_span)
        else:  # a direct call: where scope.call was awaited
            parent = otel_context.get_current()
        return self._tracer.start_span(
            f"execute_tool {name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function",
            },
        )

    def _end_children(self, call_id: str) -> None:
        """Nested calls that emit no result (the one a suspension paused on, calls a run
        abandoned) end with their run."""
        prefix = f"{call_id}:ptc:"
        for child_id in [c for c in self._open if c.startswith(prefix)]:
            span = self._open.pop(child_id)
            span.set_attribute("error.type", "ABANDONED")
            span.set_status(Status(StatusCode.ERROR, "the run ended before this call did"))
            span.end(end_time=time.time_ns())


def _run_facts(span: Span, meta: Any) -> None:
    enforcement = meta.get("enforcement")
    if isinstance(enforcement, dict):
        for dimension, report in enforcement.items():
            if isinstance(report, dict) and isinstance(report.get("level"), str):
                span.set_attribute(f"ptc.enforcement.{dimension}", report["level"])
    stats = meta.get("stats")
    if isinstance(stats, dict):
        for key in ("wall_ms", "cpu_ms", "calls", "peak_memory_kib"):
            value = stats.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                span.set_attribute(f"ptc.stats.{key}", value)
    failure = meta.get("failure")
    if isinstance(failure, dict) and isinstance(failure.get("kind"), str):
        span.set_attribute("ptc.failure.kind", failure["kind"])
