"""How runs use a session: one at a time in call order, each restoring the last version and
committing a new one by the commit rules; fork, reset and close in the same order.

A :class:`SessionKeeper` is one session of one runtime (every ``Session`` object for the
same id in the same runtime shares it). Each ``run_code`` call through a session takes a
ticket when it is called (:meth:`SessionKeeper.ticket`), so its run waits until the runs
called before it are done (:meth:`SessionKeeper.turn`): call order, whatever the pipeline
stages before the body take. The body gets a :class:`SessionCall` through a context
variable (:func:`take_session_call`), begins a :class:`SessionTurn` (the state to restore,
or ``SESSION_EXPIRED``) and the run finishes it with the worker's outcome:

- a run that ended (``done``: returned, or raised, see ``worker.SESSION_SAVED_KINDS``)
  commits the state its worker saved as the next version;
- a run killed (a limit, a breach, the worker died), aborted, suspended or diverged on
  replay commits nothing: the session keeps its previous version (``kept_previous``), as
  does a state over ``Limits.session_mib`` (the worker names the largest names);
- a resumed run commits only if the session is still at the version it paused from.

Either way ``meta["session"]`` says where the session is, and one line tells the model
what was dropped or not saved (never silently).
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from worker import SESSION_SAVED_KINDS, RunOutcome

from .._calls._body import BodyFailure
from .._errors import SessionError
from .._json import JSON
from ._session_store import (
    DEFAULT_SESSION_TTL_SECONDS,
    SessionKey,
    SessionRecord,
    SessionStore,
    digest,
)

__all__ = (
    "SessionCall",
    "called_with_ticket",
    "take_ticket",
    "SessionKeeper",
    "SessionKeepers",
    "SessionNote",
    "SessionTurn",
    "calling_session",
    "take_session_call",
)

T = TypeVar("T")
_CALL: contextvars.ContextVar[SessionCall | None] = contextvars.ContextVar(
    "ptc_session_call", default=None
)
_TICKET: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "ptc_session_ticket", default=None
)


def called_with_ticket(ticket: int) -> contextvars.Token[int | None]:
    """Set the ticket a ``Session.call`` of ``run_code`` took (reset the token after)."""
    return _TICKET.set(ticket)


def take_ticket() -> int | None:
    """The ticket taken when this ``run_code`` was called, consumed (``None``: none)."""
    ticket = _TICKET.get()
    _TICKET.set(None)
    return ticket


@dataclass(frozen=True, slots=True)
class SessionCall:
    """What ``Session.run_code`` hands its body: the session, and whether to start empty."""

    keeper: SessionKeeper
    reset: bool


def calling_session(call: SessionCall) -> contextvars.Token[SessionCall | None]:
    """Set the session of the ``run_code`` body about to run (reset the token after)."""
    return _CALL.set(call)


def take_session_call() -> SessionCall | None:
    """The session of this ``run_code`` body, consumed: a call it makes runs sessionless."""
    call = _CALL.get()
    _CALL.set(None)
    return call


@dataclass(frozen=True, slots=True)
class SessionNote:
    """What a finished run says of its session: ``meta["session"]`` and one line for the
    model (empty when nothing was dropped and the state was saved)."""

    meta: dict[str, JSON]
    line: str


class SessionKeeper:
    """One session (``key``) of one runtime, in ``store``; runs on it in call order."""

    def __init__(self, store: SessionStore, key: SessionKey) -> None:
        self.store = store
        self.key = key
        self._issued = 0
        self._serving = 0
        self._released: set[int] = set()
        self._waiting: dict[int, anyio.Event] = {}

    def ticket(self) -> int:
        """A place in this session's line, taken when a run (or fork, reset, close) is
        called; :meth:`release` it if it never gets to :meth:`turn`."""
        self._issued += 1
        return self._issued - 1

    @asynccontextmanager
    async def turn(self, ticket: int | None = None) -> AsyncIterator[None]:
        """Wait until everything called before ``ticket`` (a new one when ``None``) is done,
        and hold the session until the block ends."""
        if ticket is None:
            ticket = self.ticket()
        try:
            if ticket != self._serving:
                await self._waiting.setdefault(ticket, anyio.Event()).wait()
            yield
        finally:
            self.release(ticket)

    def release(self, ticket: int) -> None:
        """``ticket`` is done (or will never run): the next in line goes. Idempotent."""
        if ticket < self._serving or ticket in self._released:
            return
        self._released.add(ticket)
        self._waiting.pop(ticket, None)
        while self._serving in self._released:
            self._released.discard(self._serving)
            self._serving += 1
        woken = self._waiting.pop(self._serving, None)
        if woken is not None:
            woken.set()

    @property
    def id(self) -> str:
        return self.key[1]

    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        if self.store.offloads:
            return await anyio.to_thread.run_sync(fn, *args)
        return fn(*args)

    async def load(self) -> SessionRecord | None:
        """The session's record, ``None`` when it is gone (``store.gone`` says why)."""
        return await self._io(self.store.load, self.key)

    async def save(self, record: SessionRecord) -> SessionRecord:
        return await self._io(self.store.save, record)

    def gone_message(self) -> str:
        why = self.store.gone(self.key) or "is unknown to the session store (or expired)"
        if not why.startswith("is "):
            why = f"was {why}"
        return (
            f"session {self.id!r} {why}; its variables and files are gone. Ask the host "
            "for a new session, and fetch what you need again"
        )

    async def begin(
        self, *, profile: str, reset: bool, expect_version: int | None
    ) -> SessionTurn:
        """The turn of a run about to start; ``SESSION_EXPIRED`` when the session is gone,
        or its stored state is refused (``reset`` starts from nothing: nothing to refuse)."""
        try:
            record = await self.load()
        except SessionError as exc:
            if not reset:
                raise BodyFailure("SESSION_EXPIRED", f"{exc}. Run with reset=true") from None
            # Its state refused, the session starts again from nothing, under its id.
            scope_path, session_id = self.key
            record = SessionRecord.new(
                id=session_id,
                scope_path=scope_path,
                profile=profile,
                ttl_seconds=DEFAULT_SESSION_TTL_SECONDS,
                now=self.store.clock(),
            )
        if record is None:
            raise BodyFailure("SESSION_EXPIRED", self.gone_message())
        if record.profile != profile and not reset:
            raise BodyFailure(
                "SESSION_EXPIRED",
                f"session {self.id!r} holds a state of the {record.profile} profile, and this "
                f"scope now runs {profile}: run with reset=true to start it again",
            )
        return SessionTurn(self, record, profile, reset, expect_version)

    async def fork(self, new_id: str) -> SessionRecord:
        """A new session with this one's state and files (the same bytes, bound anew)."""
        record = await self._alive()
        now = self.store.clock()
        twin = replace(record, id=new_id, created_at=now, used_at=now)
        return await self.save(twin)

    async def reset(self) -> SessionRecord:
        """An empty state (no globals, no files) as the next version."""
        record = await self._alive()
        empty = b""
        return await self.save(
            replace(
                record,
                version=record.version + 1,
                state=empty,
                digest=digest(empty),
                names=(),
                dropped=(),
                used_at=self.store.clock(),
            )
        )

    async def close(self) -> None:
        await self._io(self.store.remove, self.key, "closed by the host")

    async def _alive(self) -> SessionRecord:
        record = await self.load()
        if record is None:
            raise SessionError(self.gone_message())
        return record


class SessionTurn:
    """One run's use of its session: the state to restore, then the commit (see the
    module docstring)."""

    def __init__(
        self,
        keeper: SessionKeeper,
        record: SessionRecord,
        profile: str,
        reset: bool,
        expect_version: int | None,
    ) -> None:
        self.keeper = keeper
        self.record = record
        self.profile = profile
        self.state = b"" if reset else record.state
        self.expect_version = expect_version

    @property
    def session_id(self) -> str:
        return self.keeper.id

    @property
    def version(self) -> int:
        return self.record.version

    async def finish(self, outcome: RunOutcome | None, stopped: str = "") -> SessionNote:
        """Commit the run's state, or keep the previous version and say why (``stopped``:
        the run was suspended, aborted or diverged, whatever its worker saved)."""
        record = self.record
        saved = outcome.session if outcome is not None else None
        why = stopped or _why_not_saved(outcome)
        if not why and self.expect_version is not None and record.version != self.expect_version:
            why = (
                f"the session moved on to version {record.version} while this run was "
                f"paused at version {self.expect_version}"
            )
        now = self.keeper.store.clock()
        if not why and saved is not None and saved.blob is not None:
            record = replace(
                record,
                version=record.version + 1,
                profile=self.profile,
                state=saved.blob,
                digest=digest(saved.blob),
                names=saved.names,
                dropped=saved.dropped,
                used_at=now,
            )
        elif not why and saved is not None:
            why = saved.problem or "the worker saved no state"
        else:
            why = why or "the worker saved no state"
        if why:
            record = replace(record, used_at=now)
        try:
            record = await self.keeper.save(record)
        except (SessionError, OSError) as exc:
            why = why or f"the session store could not keep it: {exc}"
        return _note(record, saved.dropped if saved is not None else (), why)


def _why_not_saved(outcome: RunOutcome | None) -> str:
    if outcome is None:
        return "the run did not end"
    if outcome.ok or outcome.kind in SESSION_SAVED_KINDS:
        return ""
    return f"the run was stopped ({outcome.kind}) before its end"


def _note(record: SessionRecord, dropped: tuple[tuple[str, str], ...], why: str) -> SessionNote:
    meta: dict[str, JSON] = {
        "id": record.id,
        "version": record.version,
        "bytes": len(record.state),
        "names": list(record.names),
        "dropped": [{"name": name, "reason": reason} for name, reason in dropped],
        "kept_previous": bool(why),
        "expires_at": record.expires_at,
    }
    lines = []
    if dropped:
        listed = "; ".join(f"{name} ({reason})" for name, reason in dropped)
        lines.append(f"[session] Not kept for the next run: {listed}.")
    if why:
        lines.append(
            f"[session] This run's variables and files were not saved ({why}); the next run "
            f"starts from the session as it was before it (version {record.version})."
        )
    return SessionNote(meta=meta, line="\n".join(lines))


class SessionKeepers:
    """The sessions of one runtime: its store, and one keeper per session in use (shared
    by every ``Session`` object of that id, so their runs line up in one order)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._keepers: weakref.WeakValueDictionary[SessionKey, SessionKeeper]
        self._keepers = weakref.WeakValueDictionary()

    def keeper(self, key: SessionKey) -> SessionKeeper:
        found = self._keepers.get(key)
        if found is None:
            found = self._keepers[key] = SessionKeeper(self.store, key)
        return found
