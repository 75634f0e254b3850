"""What ``worker.ray`` sends across a cluster: JSON text only, never pickled objects.

Ray pickles the arguments of its own remote calls; every argument ``worker.ray`` passes is
a ``str`` of JSON made here, so the only thing Ray ever pickles of ours is a string. Host
-> node: the containment settings (once, when a node's actor starts), one run request per
run, and the replies to each batch of calls. Node -> host: a stream of event lists
(``calls``, ``stdout``, ``log``, and ``outcome`` last).

The decoders check shapes and types and raise :class:`~worker.ProtocolError` on anything
else, so a broken peer ends one run as ``protocol`` instead of a host exception. This
module imports neither Ray nor anything that starts processes.
"""

from __future__ import annotations

import binascii
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from .._errors import ProtocolError
from .._types import (
    DIMENSIONS,
    FAILURE_KINDS,
    MIB,
    CallReply,
    CallRequest,
    CapturedOutput,
    Containment,
    Dimension,
    Enforcement,
    Limits,
    RunOutcome,
    RunRequest,
    RunStats,
    SessionSave,
)

Event: TypeAlias = dict[str, Any]

_LEVELS = ("full", "partial", "none")
_PROFILES = ("python", "restricted")


def _dumps(value: object) -> str:
    return json.dumps(value, allow_nan=False, separators=(",", ":"))


def _loads(text: str | bytes, what: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"{what}: not valid JSON ({exc})") from exc


def _want(value: object, kind: type | tuple[type, ...], what: str) -> Any:
    # bool is an int to isinstance; JSON true is never a count or a size here.
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ProtocolError(f"{what}: expected {getattr(kind, '__name__', kind)}")
    return value


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in obj:
        raise ProtocolError(f"{what}: missing {key!r}")
    return _want(obj[key], kind, f"{what}.{key}")


# -- host -> node ------------------------------------------------------------------------


def encode_containment(containment: Containment) -> str:
    data = dataclasses.asdict(containment)
    data["require"] = sorted(containment.require)
    return _dumps(data)


def decode_containment(text: str) -> Containment:
    data = _want(_loads(text, "containment"), dict, "containment")
    try:
        return Containment(**{**data, "require": frozenset(data.get("require", DIMENSIONS))})
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"containment: {exc}") from exc


def encode_request(request: RunRequest) -> str:
    return _dumps(
        {
            "code": request.code,
            "sdk_module": request.sdk_module,
            "profile": request.profile,
            "limits": dataclasses.asdict(request.limits),
            "session": None if request.session is None else _b64(request.session),
        }
    )


def decode_request(text: str) -> RunRequest:
    data = _want(_loads(text, "request"), dict, "request")
    profile = _field(data, "profile", str, "request")
    if profile not in _PROFILES:
        raise ProtocolError(f"request.profile: unknown profile {profile!r}")
    try:
        limits = Limits(**_field(data, "limits", dict, "request"))
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"request.limits: {exc}") from exc
    session = _field(data, "session", (str, type(None)), "request")
    return RunRequest(
        code=_field(data, "code", str, "request"),
        sdk_module=_field(data, "sdk_module", str, "request"),
        profile=profile,
        limits=limits,
        session=None if session is None else _unb64(session, limits.session_mib * MIB),
    )


def _b64(blob: bytes) -> str:
    return binascii.b2a_base64(blob, newline=False).decode("ascii")


def _unb64(text: str, limit: int) -> bytes:
    """A session's state by value (strict base64, at most ``limit`` bytes): opaque bytes,
    never parsed here."""
    if len(text) > 4 * ((limit + 2) // 3):
        raise ProtocolError(f"session: a state over {limit} bytes")
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError(f"session: not base64: {exc}") from None


def encode_replies(batch: int, replies: Sequence[CallReply]) -> str:
    """One batch's replies; a value that is not JSON becomes a failed reply, as locally."""
    items = []
    for reply in replies:
        if reply.ok:
            try:
                _dumps(reply.value)
                items.append({"ok": True, "value": reply.value})
                continue
            except (TypeError, ValueError, RecursionError) as exc:
                reply = CallReply.failure(
                    "INVALID_RESULT", f"the tool result could not be sent to the worker: {exc}"
                )
        items.append({"ok": False, "code": reply.code, "message": reply.message})
    return _dumps({"batch": batch, "replies": items})


def decode_replies(text: str) -> tuple[int, list[CallReply]]:
    """``(batch, replies)``."""
    data = _want(_loads(text, "replies"), dict, "replies")
    batch: int = _field(data, "batch", int, "replies")
    replies = []
    for item in _field(data, "replies", list, "replies"):
        _want(item, dict, "reply")
        if _field(item, "ok", bool, "reply"):
            replies.append(CallReply.success(item.get("value")))
        else:
            code = _field(item, "code", str, "reply")
            replies.append(CallReply.failure(code, _field(item, "message", str, "reply")))
    return batch, replies


# -- node -> host ------------------------------------------------------------------------


def calls_event(batch: int, calls: Sequence[CallRequest]) -> Event:
    items = [{"id": c.id, "tool": c.tool, "arguments": c.arguments} for c in calls]
    return {"type": "calls", "batch": batch, "calls": items}


def outcome_event(outcome: RunOutcome) -> Event:
    out = outcome.output
    return {
        "type": "outcome",
        "ok": outcome.ok,
        "value": outcome.value,
        "kind": outcome.kind,
        "detail": outcome.detail,
        "output": {"text": out.text, "total_bytes": out.total_bytes, "truncated": out.truncated},
        "enforcement": outcome.enforcement_json(),
        "stats": outcome.stats.as_json(),
        "session": None if outcome.session is None else _saved_json(outcome.session),
    }


def _saved_json(saved: SessionSave) -> dict[str, Any]:
    return {
        "blob": None if saved.blob is None else _b64(saved.blob),
        "names": list(saved.names),
        "dropped": [list(item) for item in saved.dropped],
        "problem": saved.problem,
    }


def decode_saved(data: object, limit: int) -> SessionSave | None:
    """The state a run on a node saved (``None``: none); its blob at most ``limit`` bytes."""
    if data is None:
        return None
    _want(data, dict, "outcome.session")
    assert isinstance(data, dict)
    blob = _field(data, "blob", (str, type(None)), "outcome.session")
    names = _field(data, "names", list, "outcome.session")
    dropped = _field(data, "dropped", list, "outcome.session")
    if not all(type(n) is str for n in names) or not all(
        type(d) is list and len(d) == 2 and all(type(x) is str for x in d) for d in dropped
    ):
        raise ProtocolError("outcome.session: names and dropped are strings")
    return SessionSave(
        blob=None if blob is None else _unb64(blob, limit),
        names=tuple(names),
        dropped=tuple((d[0], d[1]) for d in dropped),
        problem=_field(data, "problem", str, "outcome.session"),
    )


def encode_events(events: Sequence[Event]) -> str:
    """A list of events, consecutive ``stdout`` chunks merged (fewer, larger objects)."""
    merged: list[Event] = []
    for event in events:
        if event["type"] == "stdout" and merged and merged[-1]["type"] == "stdout":
            merged[-1] = {"type": "stdout", "data": merged[-1]["data"] + event["data"]}
        else:
            merged.append(event)
    return _dumps(merged)


def decode_events(text: str) -> list[Event]:
    events: list[Event] = _want(_loads(text, "events"), list, "events")
    for event in events:
        _want(event, dict, "event")
        kind = _field(event, "type", str, "event")
        if kind == "calls":
            _field(event, "batch", int, "calls")
            for call in _field(event, "calls", list, "calls"):
                _want(call, dict, "call")
                _field(call, "id", int, "call")
                _field(call, "tool", str, "call")
                _field(call, "arguments", dict, "call")
        elif kind == "stdout":
            _field(event, "data", str, "stdout")
        elif kind == "log":
            record = _field(event, "record", dict, "log")
            _field(record, "name", str, "log.record")
            _field(record, "levelno", int, "log.record")
            _field(record, "msg", str, "log.record")
        elif kind != "outcome":
            raise ProtocolError(f"event: unknown type {kind!r}")
    return events


def call_requests(event: Event) -> list[CallRequest]:
    """The calls of a (decoded) ``calls`` event."""
    return [
        CallRequest(id=c["id"], tool=c["tool"], arguments=c["arguments"]) for c in event["calls"]
    ]


def decode_enforcement(data: object, node: str) -> dict[Dimension, Enforcement]:
    """The report as the node gave it (empty when the run failed before a child started)."""
    _want(data, dict, "enforcement")
    assert isinstance(data, dict)
    unknown = sorted(set(data) - set(DIMENSIONS))
    if unknown:
        raise ProtocolError(f"enforcement: unknown dimensions {unknown}")
    report: dict[Dimension, Enforcement] = {}
    for dim in DIMENSIONS:
        if dim not in data:
            continue
        item = _field(data, dim, dict, "enforcement")
        level = _field(item, "level", str, f"enforcement.{dim}")
        if level not in _LEVELS:
            raise ProtocolError(f"enforcement.{dim}.level: {level!r}")
        report[dim] = Enforcement(
            level=level,
            mechanism=_field(item, "mechanism", str, f"enforcement.{dim}"),
            gap=_field(item, "gap", str, f"enforcement.{dim}"),
            node=node,
        )
    return report


def decode_outcome(event: Event, node: str, session_bytes: int = 16 * MIB) -> RunOutcome:
    """The run's outcome from an ``outcome`` event, with ``node`` named in it (a saved
    session state at most ``session_bytes``)."""
    ok = _field(event, "ok", bool, "outcome")
    kind = event.get("kind")
    if ok and kind is not None or not ok and kind not in FAILURE_KINDS:
        raise ProtocolError(f"outcome.kind: {kind!r} with ok={ok}")
    out = _field(event, "output", dict, "outcome")
    stats = _field(event, "stats", dict, "outcome")
    return RunOutcome(
        ok=ok,
        value=event.get("value"),
        kind=kind,
        detail=_field(event, "detail", str, "outcome"),
        output=CapturedOutput(
            text=_field(out, "text", str, "outcome.output"),
            total_bytes=_field(out, "total_bytes", int, "outcome.output"),
            truncated=_field(out, "truncated", bool, "outcome.output"),
        ),
        enforcement=decode_enforcement(event.get("enforcement"), node),
        stats=RunStats(
            wall_ms=float(_field(stats, "wall_ms", (int, float), "outcome.stats")),
            cpu_ms=float(_field(stats, "cpu_ms", (int, float), "outcome.stats")),
            calls=_field(stats, "calls", int, "outcome.stats"),
            peak_memory_kib=_field(stats, "peak_memory_kib", (int, type(None)), "outcome.stats"),
            node=node,
        ),
        session=decode_saved(event.get("session"), session_bytes),
    )
