"""What ``worker.ray`` sends across a cluster: JSON text, exact round trips, hostile input
refused as ``ProtocolError``; and the extra stays out of ``import ptc``.

No cluster here (``test_ray.py`` has the real one): these run in the main pytest run.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import typing
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import _strategies as strategies
from worker import (
    DIMENSIONS,
    CallReply,
    CallRequest,
    CapturedOutput,
    Containment,
    Enforcement,
    Limits,
    ProtocolError,
    RunOutcome,
    RunRequest,
    RunStats,
    SessionSave,
)
from worker._ray._wire import (
    calls_event,
    decode_containment,
    decode_events,
    decode_outcome,
    decode_replies,
    decode_request,
    encode_containment,
    encode_events,
    encode_replies,
    encode_request,
    outcome_event,
)

JSON_VALUES = strategies.json_values()


@given(code=st.text(), sdk=st.text(), profile=st.sampled_from(["python", "restricted"]))
def test_a_run_request_survives_the_trip(code: str, sdk: str, profile: str) -> None:
    limits = Limits(wall_seconds=1.5, memory_mib=77, max_calls=3)
    request = RunRequest(code=code, sdk_module=sdk, profile=profile, limits=limits)  # type: ignore[arg-type]
    text = encode_request(request)
    assert isinstance(text, str)
    assert decode_request(text) == request


@given(state=st.binary(max_size=4096) | st.none())
def test_a_sessions_state_travels_by_value(state: bytes | None) -> None:
    request = RunRequest(code="x", sdk_module="", session=state)
    assert decode_request(encode_request(request)) == request
    saved = SessionSave(blob=state, names=("x",), dropped=(("g", "a generator"),), problem="")
    (event,) = decode_events(encode_events([outcome_event(RunOutcome(ok=True, session=saved))]))
    assert decode_outcome(event, "n").session == saved


def test_a_state_over_session_mib_from_a_node_is_refused() -> None:
    saved = SessionSave(blob=b"x" * 2048)
    (event,) = decode_events(encode_events([outcome_event(RunOutcome(ok=True, session=saved))]))
    with pytest.raises(ProtocolError, match="over 1024 bytes"):
        decode_outcome(event, "n", session_bytes=1024)
    event["session"]["blob"] = "not base64!"
    with pytest.raises(ProtocolError, match="not base64"):
        decode_outcome(event, "n")


@given(require=st.sets(st.sampled_from(DIMENSIONS)), landlock=st.booleans(), pool=st.integers(0, 5))
def test_containment_survives_the_trip(require: set[str], landlock: bool, pool: int) -> None:
    containment = Containment(require=frozenset(require), landlock=landlock, pool_size=pool)  # type: ignore[arg-type]
    assert decode_containment(encode_containment(containment)) == containment


@given(values=st.lists(JSON_VALUES, max_size=5), batch=st.integers(1, 10**6))
def test_replies_survive_the_trip(values: list[object], batch: int) -> None:
    replies = [CallReply.success(v) for v in values] + [CallReply.failure("DENIED", "no")]
    assert decode_replies(encode_replies(batch, replies)) == (batch, replies)


@pytest.mark.parametrize("value", [{1, 2}, float("nan"), object(), b"bytes"])
def test_a_reply_value_that_is_not_json_becomes_a_failed_reply(value: object) -> None:
    _, (reply,) = decode_replies(encode_replies(1, [CallReply.success(value)]))
    assert not reply.ok and reply.code == "INVALID_RESULT"
    assert reply.message.startswith("the tool result could not be sent to the worker")


@pytest.mark.parametrize("peak", [4, None], ids=["measured", "not-measured"])
def test_an_outcome_survives_the_trip_and_names_the_node(peak: int | None) -> None:
    enforcement = {
        dim: Enforcement(level="full" if dim != "cpu" else "partial", mechanism=f"m-{dim}", gap="g")
        for dim in DIMENSIONS
    }
    outcome = RunOutcome(
        ok=False,
        value=None,
        kind="timeout",
        detail="wall clock limit of 1 s exceeded",
        output=CapturedOutput(text="a\udc80b", total_bytes=4, truncated=False),
        enforcement=enforcement,
        stats=RunStats(wall_ms=1.5, cpu_ms=2.0, calls=3, peak_memory_kib=peak),
    )
    (event,) = decode_events(encode_events([outcome_event(outcome)]))
    back = decode_outcome(event, "n1@127.0.0.1")
    assert back.stats.node == "n1@127.0.0.1"
    assert all(e.node == "n1@127.0.0.1" for e in back.enforcement.values())
    assert back.stats.as_json() == {**outcome.stats.as_json(), "node": "n1@127.0.0.1"}
    assert {d: (e.level, e.mechanism, e.gap) for d, e in back.enforcement.items()} == {
        d: (e.level, e.mechanism, e.gap) for d, e in enforcement.items()
    }
    assert (back.ok, back.kind, back.detail, back.output) == (
        outcome.ok,
        outcome.kind,
        outcome.detail,
        outcome.output,
    )


def test_an_outcome_without_a_child_keeps_its_empty_report() -> None:
    outcome = RunOutcome(ok=False, kind="worker-exit", detail="zygote could not start a child")
    (event,) = decode_events(encode_events([outcome_event(outcome)]))
    assert decode_outcome(event, "n").enforcement == {}


def test_events_merge_consecutive_output_and_keep_order() -> None:
    calls = calls_event(1, [CallRequest(id=1, tool="t", arguments={"a": [1]})])
    events = [
        {"type": "stdout", "data": "a"},
        {"type": "stdout", "data": "b"},
        calls,
        {"type": "stdout", "data": "c"},
    ]
    assert decode_events(encode_events(events)) == [
        {"type": "stdout", "data": "ab"},
        calls,
        {"type": "stdout", "data": "c"},
    ]


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "{}",
        "[1]",
        '[{"type": "exec", "code": "x"}]',
        '[{"type": "stdout", "data": 1}]',
        '[{"type": "calls", "batch": true, "calls": []}]',
        '[{"type": "calls", "batch": 1, "calls": [{"id": 1, "tool": "t", "arguments": []}]}]',
        '[{"type": "log", "record": {"name": "x", "levelno": "WARNING", "msg": "m"}}]',
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_malformed_events_are_a_protocol_error(text: str) -> None:
    with pytest.raises(ProtocolError):
        decode_events(text)


GOOD_OUTCOME = outcome_event(RunOutcome(ok=True, value=1))


@pytest.mark.parametrize(
    "change",
    [
        {"ok": "yes"},
        {"ok": True, "kind": "timeout"},
        {"ok": False, "kind": None},
        {"ok": False, "kind": "made-up"},
        {"enforcement": {"gpu": {"level": "full", "mechanism": "", "gap": ""}}},
        {"enforcement": {"cpu": {"level": "total", "mechanism": "", "gap": ""}}},
        {"stats": {"wall_ms": 1, "cpu_ms": 1, "calls": 1.5, "peak_memory_kib": 1}},
        {"output": {"text": "", "total_bytes": False, "truncated": False}},
    ],
)
def test_a_malformed_outcome_is_a_protocol_error(change: dict[str, object]) -> None:
    with pytest.raises(ProtocolError):
        decode_outcome({**GOOD_OUTCOME, **change}, "n")


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"batch": 1}',
        '{"batch": "1", "replies": []}',
        '{"batch": 1, "replies": [{"ok": 1}]}',
        '{"batch": 1, "replies": [{"ok": false, "code": 3, "message": ""}]}',
    ],
)
def test_malformed_replies_are_a_protocol_error(text: str) -> None:
    with pytest.raises(ProtocolError):
        decode_replies(text)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"code": "", "sdk_module": "", "profile": "lua", "limits": {}}),
        json.dumps({"code": "", "sdk_module": "", "profile": "python", "limits": {"x": 1}}),
        json.dumps({"code": 1, "sdk_module": "", "profile": "python", "limits": {}}),
        json.dumps(
            {"code": "", "sdk_module": "", "profile": "python", "limits": {"wall_seconds": -1}}
        ),
    ],
)
def test_a_malformed_request_is_a_protocol_error(text: str) -> None:
    with pytest.raises(ProtocolError):
        decode_request(text)


def test_the_node_actor_takes_and_returns_only_text() -> None:
    """Ray pickles remote arguments and results: ours are ``str`` (or nothing) throughout."""
    from worker._ray._node import NodeService

    public = {
        name: fn
        for name, fn in inspect.getmembers(NodeService, inspect.isfunction)
        if not name.startswith("_") or name == "__init__"
    }
    assert set(public) == {"__init__", "start", "status", "run", "reply", "cancel", "close"}
    for name, fn in public.items():
        hints = typing.get_type_hints(fn)
        returned = hints.pop("return")
        assert set(hints.values()) <= {str}, (name, hints)
        assert returned in (str, None, type(None), AsyncIterator[str]), (name, returned)


def test_importing_ptc_or_worker_does_not_import_ray() -> None:
    code = (
        "import sys, ptc, worker, worker.testing\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray' or '_ray' in m "
        "or m == 'worker.ray'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_worker_ray_exports_the_backend_and_its_node_view() -> None:
    import worker.ray

    assert worker.ray.__all__ == ("RayBackend", "RayNode")
    with pytest.raises(ValueError, match="host_grace_seconds"):
        worker.ray.RayBackend(host_grace_seconds=0)
