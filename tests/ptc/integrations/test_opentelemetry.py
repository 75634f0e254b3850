"""``ptc.integrations.opentelemetry``: GenAI tool spans, read back from the SDK's own
``InMemorySpanExporter``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import ptc
from ptc.integrations import opentelemetry

from .host import PROGRAM, Host, code_scope

pytestmark = pytest.mark.anyio


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def by_call_id(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {str(s.attributes["gen_ai.tool.call.id"]): s for s in spans if s.attributes}


async def test_a_run_code_span_parents_its_nested_calls_under_the_callers_span(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    host = Host()
    host.defer = False
    async with code_scope(host) as scope:
        opentelemetry.instrument(_runtime_of(host), tracer_provider=provider)
        with provider.get_tracer("host").start_as_current_span("agent turn") as turn:
            result = await scope.run_code(PROGRAM, call_id="tc_1")
    assert not result.is_error
    spans = by_call_id(exporter.get_finished_spans())
    run = spans["tc_1"]
    assert run.name == "execute_tool run_code" and run.kind == SpanKind.INTERNAL
    assert run.parent is not None and run.parent.span_id == turn.get_span_context().span_id
    attributes = run.attributes or {}
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "run_code"
    assert attributes["ptc.stats.calls"] == 4 and "ptc.stats.wall_ms" in attributes
    assert attributes["ptc.enforcement.network"] in ("full", "partial", "none")
    nested = [spans[f"tc_1:ptc:{n}"] for n in (1, 2, 3, 4)]
    assert [s.name for s in nested] == ["execute_tool read_note"] * 2 + [
        "execute_tool delete_note",
        "execute_tool read_note",
    ]
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in nested)
    assert all(s.status.status_code == StatusCode.UNSET for s in [run, *nested])


async def test_failures_carry_error_type_and_an_error_status(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    host = Host()
    async with code_scope(host) as scope:
        opentelemetry.instrument(_runtime_of(host), tracer_provider=provider)
        await scope.run_code("return tools.delete_note(note_id=13)", call_id="denied")
        await scope.call("no_such_tool", {}, call_id="unknown")
        await scope.run_code("return 1/0", call_id="bad")
    spans = by_call_id(exporter.get_finished_spans())
    assert spans["denied:ptc:1"].attributes["error.type"] == "DENIED"  # type: ignore[index]
    assert spans["denied"].attributes["ptc.failure.kind"] == "exception"  # type: ignore[index]
    assert spans["unknown"].attributes["error.type"] == "UNKNOWN_TOOL"  # type: ignore[index]
    assert spans["bad"].status.status_code == StatusCode.ERROR
    assert "ZeroDivisionError" in (spans["bad"].status.description or "")


async def test_a_paused_run_ends_its_pending_calls_span_and_the_resume_traces_again(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    host = Host()
    def setup(runtime: ptc.ToolRuntime) -> None:  # before the host's policy: the spans cover it
        opentelemetry.instrument(runtime, tracer_provider=provider)

    async with code_scope(host, setup) as scope:
        paused = await scope.run_code(PROGRAM, call_id="tc_1")
        assert paused.error is not None and paused.error.code == "SUSPENDED"
        await scope.resume("tc_1", "allowed-once")
    finished = exporter.get_finished_spans()
    runs = [s for s in finished if s.name == "execute_tool run_code"]
    assert [(s.attributes or {}).get("error.type") for s in runs] == ["SUSPENDED", None]
    pending = [s for s in finished if s.name == "execute_tool delete_note"]
    assert [(s.attributes or {}).get("error.type") for s in pending] == ["ABANDONED", None]
    assert all(s.end_time is not None for s in finished)


async def test_the_disposer_stops_tracing(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    host = Host()
    async with code_scope(host) as scope:
        dispose = opentelemetry.instrument(_runtime_of(host), tracer_provider=provider)
        dispose()
        await scope.run_code("return 1")
    assert exporter.get_finished_spans() == ()


def _runtime_of(host: Host) -> ptc.ToolRuntime:
    assert host.runtime is not None
    return host.runtime
