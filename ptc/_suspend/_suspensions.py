"""Suspended runs: what was recorded when a program's call was deferred, and where it is kept.

A :class:`Suspension` is plain data (JSON, never pickled): the program, the scope it ran in,
every call that completed before the pause (name, arguments and the reply the program got),
the call awaiting approval, and what the paused run showed (its output and ``meta``). A store
keeps suspensions until they are resumed once, bound to their scope, until they expire, and
finds them by token or by the ``run_code`` call id they paused (an agent framework knows its
tool call ids, not ptc's tokens):

- :class:`SuspensionStore` keeps them in memory (the runtime's default);
- :class:`~ptc._suspend._suspension_files.FileSuspensionStore` keeps one signed JSON file per
  suspension under a directory, so a restarted host can resume them.

Tokens are 128-bit random strings.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

import anyio.to_thread

from .._errors import SuspensionError, UsageError
from .._json import JSON

__all__ = (
    "DEFAULT_TTL_SECONDS",
    "PendingApproval",
    "RecordedCall",
    "Suspension",
    "SuspensionStore",
    "new_token",
)

DEFAULT_TTL_SECONDS: Final = 24 * 3600.0


def new_token() -> str:
    return secrets.token_urlsafe(16)


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedCall:
    """A call that completed before the pause, and the reply its program got."""

    n: int
    """Its position among the run's calls, from 1 in submission order."""
    name: str
    arguments: JSON
    ok: bool
    value: JSON
    code: str
    message: str
    content: JSON
    """What the dispatch log recorded as its content."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingApproval:
    """The call whose approval was deferred."""

    n: int
    sub_call_id: str
    name: str
    arguments: JSON
    reason: str | None
    display_reason: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Suspension:
    """One paused run (see the module docstring)."""

    token: str
    scope_path: str
    call_id: str
    root_call_id: str
    code: str
    description: str | None
    created_at: float
    expires_at: float
    calls: tuple[RecordedCall, ...]
    pending: PendingApproval
    output: str = ""
    """The output the paused run had captured."""
    meta: JSON = None
    """The paused ``run_code`` result's ``meta`` (dispatch log, enforcement, stats,
    ``suspension``): a call of ``run_code`` with the same call id returns it again."""
    resumes: int = 0
    """How many times this call's program was resumed before this pause (0: its first
    pause). A framework that re-runs a tool on resume replays its earlier answers by it."""
    session: JSON = None
    """``{"id", "version"}`` of the session the run paused on (``None``: no session): it
    resumes on that session, and commits only if the session is still at that version."""

    def as_json(self) -> dict[str, Any]:
        """The record as plain JSON (what a :class:`FileSuspensionStore` writes)."""
        data = asdict(self)
        data["calls"] = [asdict(c) for c in self.calls]
        return data

    @classmethod
    def from_json(cls, data: object) -> Suspension:
        """Strictly validated: every field present with its type, nothing else."""
        obj = _fields(data, "suspension", _SUSPENSION_FIELDS, _SUSPENSION_LATER_FIELDS)
        calls = obj["calls"]
        if not isinstance(calls, list):
            raise SuspensionError("the suspension record is malformed: calls is not a list")
        return cls(
            token=obj["token"],
            scope_path=obj["scope_path"],
            call_id=obj["call_id"],
            root_call_id=obj["root_call_id"],
            code=obj["code"],
            description=obj["description"],
            created_at=float(obj["created_at"]),
            expires_at=float(obj["expires_at"]),
            calls=tuple(
                RecordedCall(**_fields(c, f"calls[{i}]", _CALL_FIELDS)) for i, c in enumerate(calls)
            ),
            pending=PendingApproval(**_fields(obj["pending"], "pending", _PENDING_FIELDS)),
            output=obj.get("output", ""),
            meta=obj.get("meta"),
            resumes=obj.get("resumes", 0),
            session=obj.get("session"),
        )


def _is_int(v: object) -> bool:
    return type(v) is int


def _is_str(v: object) -> bool:
    return type(v) is str


def _is_number(v: object) -> bool:
    return type(v) in (int, float)


def _is_optional_str(v: object) -> bool:
    return v is None or type(v) is str


def _any(v: object) -> bool:
    return True


_SUSPENSION_FIELDS: dict[str, Any] = {
    "token": _is_str,
    "scope_path": _is_str,
    "call_id": _is_str,
    "root_call_id": _is_str,
    "code": _is_str,
    "description": _is_optional_str,
    "created_at": _is_number,
    "expires_at": _is_number,
    "calls": lambda v: type(v) is list,
    "pending": lambda v: type(v) is dict,
}
# Fields added after the first records were written: a record without them is still read.
_SUSPENSION_LATER_FIELDS: dict[str, Any] = {
    "output": _is_str,
    "meta": lambda v: v is None or type(v) is dict,
    "resumes": lambda v: type(v) is int and v >= 0,
    "session": lambda v: v is None
    or (
        type(v) is dict
        and set(v) == {"id", "version"}
        and type(v["id"]) is str
        and type(v["version"]) is int
    ),
}
_CALL_FIELDS: dict[str, Any] = {
    "n": _is_int,
    "name": _is_str,
    "arguments": lambda v: type(v) is dict,
    "ok": lambda v: type(v) is bool,
    "value": _any,
    "code": _is_str,
    "message": _is_str,
    "content": lambda v: type(v) is list,
}
_PENDING_FIELDS: dict[str, Any] = {
    "n": _is_int,
    "sub_call_id": _is_str,
    "name": _is_str,
    "arguments": lambda v: type(v) is dict,
    "reason": _is_optional_str,
    "display_reason": _is_optional_str,
}


def _fields(
    data: object, where: str, spec: Mapping[str, Any], later: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    if type(data) is not dict:
        raise SuspensionError(f"the suspension record is malformed: {where} is not an object")
    assert isinstance(data, dict)
    optional = later or {}
    if not set(spec) <= set(data) <= set(spec) | set(optional):
        raise SuspensionError(
            f"the suspension record is malformed: {where} has fields {sorted(data)}, "
            f"expected {sorted(spec)}"
        )
    for name, check in {**spec, **optional}.items():
        if name in data and not check(data[name]):
            raise SuspensionError(f"the suspension record is malformed: {where}.{name}")
    return data


class SuspensionStore:
    """Suspended runs kept in memory until resumed once, bound to their scope, until they
    expire (``ttl_seconds``, default 24 h). Thread-safe. Subclass it to keep them elsewhere:
    override :meth:`_put`, :meth:`_pop`, :meth:`_peek` and the call-id index
    (:meth:`_index`, :meth:`_unindex`, :meth:`_indexed`).

    ``clock`` is the wall clock records are stamped and expire by (seconds since the epoch,
    ``time.time`` by default); tests pass one they move by hand instead of waiting."""

    def __init__(
        self,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
            raise UsageError("ttl_seconds must be a number")
        if not 0 < ttl_seconds < 10 * 365 * 86400:
            raise UsageError("ttl_seconds must be positive and under ten years")
        if not callable(clock):
            raise UsageError("clock must be a function returning the time in seconds")
        self.ttl_seconds = float(ttl_seconds)
        self.clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, Suspension] = {}
        self._by_call: dict[tuple[str, str], str] = {}
        self._used: set[str] = set()

    async def save(self, suspension: Suspension) -> None:
        """Keep ``suspension`` until it is taken or expires."""
        await anyio.to_thread.run_sync(self._save, suspension)

    def _save(self, suspension: Suspension) -> None:
        self._put(suspension)
        self._index(suspension)

    def find(self, scope_path: str, call_id: str) -> Suspension | None:
        """The live suspension of the ``run_code`` call ``call_id`` in the scope at
        ``scope_path`` (``None``: none, or it was resumed, discarded or expired).

        Reads at most one small record, so it may be called from the event loop."""
        if not isinstance(call_id, str) or not call_id:
            return None
        with self._lock:
            token = self._indexed(scope_path, call_id)
            found = self._peek(token) if token is not None else None
        if found is None or found.scope_path != scope_path or found.call_id != call_id:
            return None
        return found if found.expires_at > self.clock() else None

    async def take(self, token: str, scope_path: str) -> Suspension:
        """Remove and return the suspension of ``token`` for the scope at ``scope_path``.

        Raises :class:`ptc.SuspensionError` (nothing is consumed) for an unknown token, a
        token resumed before, one from another scope, or one that expired."""
        if not isinstance(token, str) or not token:
            raise SuspensionError("a suspension token is a non-empty string")
        return await anyio.to_thread.run_sync(self._take, token, scope_path)

    def _take(self, token: str, scope_path: str) -> Suspension:
        with self._lock:
            found = self._peek(token)
            if found is None:
                if self._was_used(token):
                    raise SuspensionError("this suspended run was resumed already")
                raise SuspensionError("no suspended run has this token (unknown or expired)")
            if found.token != token:
                raise SuspensionError("the suspension record does not belong to this token")
            if found.scope_path != scope_path:
                raise SuspensionError(
                    f"this suspended run belongs to scope {found.scope_path!r}; resume it "
                    f"there, not in {scope_path!r}"
                )
            if found.expires_at <= self.clock():
                self._pop(token)
                self._unindex(found)
                raise SuspensionError("this suspended run expired; start a new run")
            if not self._pop(token):  # another process took it between peek and pop
                raise SuspensionError("this suspended run was resumed already")
            self._unindex(found)
            self._mark_used(token)
            return found

    # -- storage (override to keep suspensions elsewhere) ------------------------------

    def _put(self, suspension: Suspension) -> None:
        with self._lock:
            self._records[suspension.token] = suspension

    def _peek(self, token: str) -> Suspension | None:
        return self._records.get(token)

    def _pop(self, token: str) -> bool:
        """Remove the record; ``False`` if it was gone already (atomically, for stores that
        several processes share)."""
        return self._records.pop(token, None) is not None

    def _was_used(self, token: str) -> bool:
        return token in self._used

    def _mark_used(self, token: str) -> None:
        self._used.add(token)

    def _index(self, suspension: Suspension) -> None:
        """Remember which token paused ``suspension.call_id`` in its scope."""
        with self._lock:
            self._by_call[(suspension.scope_path, suspension.call_id)] = suspension.token

    def _unindex(self, suspension: Suspension) -> None:
        key = (suspension.scope_path, suspension.call_id)
        if self._by_call.get(key) == suspension.token:
            del self._by_call[key]

    def _indexed(self, scope_path: str, call_id: str) -> str | None:
        """The token indexed for ``call_id`` in the scope (it may be stale: checked after)."""
        return self._by_call.get((scope_path, call_id))
