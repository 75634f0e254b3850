"""Where sessions are kept: one record per session, its state as opaque bytes bound to it.

A :class:`SessionRecord` holds a session's state exactly as a worker saved it: bytes the
host never parses (only a contained child deserializes them). Each record is bound, by an
HMAC with the store's key, to the session's id, version, scope path and profile, the
state's SHA-256, and the ptc and Python versions that made it; :meth:`SessionStore.load`
refuses a record that fails its binding (:class:`ptc.SessionError`), so a state moved to
another session, scope, profile or interpreter, or changed at rest, never reaches a
worker.

- :class:`MemorySessionStore` (the runtime's default) keeps records in memory, bounded
  by ``max_sessions`` and ``max_bytes``: the least recently used session is evicted, and
  a run on it later says so.
- :class:`~ptc._sessions._session_files.FileSessionStore` keeps signed files, for a host that
  restarts.

Expiry is sliding: a session lives ``ttl_seconds`` after its last use. The clock is the
store's (``clock=``, for tests). A store remembers why a recent session is gone (closed,
expired, evicted), so a run on it can tell the model.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from typing import Final

from .._errors import SessionError, UsageError

__all__ = (
    "DEFAULT_SESSION_TTL_SECONDS",
    "MAX_SESSION_TTL_SECONDS",
    "MemorySessionStore",
    "SessionKey",
    "SessionRecord",
    "SessionStore",
    "check_ttl",
    "new_session_id",
)

DEFAULT_SESSION_TTL_SECONDS: Final = 1200.0
MAX_SESSION_TTL_SECONDS: Final = 24 * 3600.0
_GONE_REMEMBERED = 4096
SessionKey = tuple[str, str]
"""``(scope path, session id)``: a session is found only in its own scope."""


def new_session_id() -> str:
    return "s_" + secrets.token_urlsafe(12)


def check_ttl(ttl_seconds: object) -> float:
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
        raise UsageError("ttl_seconds must be a number")
    if not 0 < ttl_seconds <= MAX_SESSION_TTL_SECONDS:
        raise UsageError(f"ttl_seconds must be above 0 and at most {MAX_SESSION_TTL_SECONDS:g}")
    return float(ttl_seconds)


def _ptc_version() -> str:
    try:
        return version("ptc")
    except PackageNotFoundError:  # pragma: no cover - a source checkout without metadata
        return "0"


VERSIONS: Final = {
    "ptc": _ptc_version(),
    "python": sys.version.split()[0] + "/" + sys.implementation.cache_tag,
}
"""What else a state is bound to: it was made by this ptc on this Python."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionRecord:
    """One session as a store keeps it (see the module docstring).

    ``state`` is opaque (empty: nothing saved yet); ``names`` and ``dropped`` are what
    the last run that saved said of it; ``used_at`` and ``ttl_seconds`` make its expiry."""

    id: str
    scope_path: str
    profile: str
    version: int
    state: bytes
    digest: str
    names: tuple[str, ...]
    dropped: tuple[tuple[str, str], ...]
    ttl_seconds: float
    created_at: float
    used_at: float
    mac: str = ""

    @property
    def key(self) -> SessionKey:
        """``(scope_path, id)``: where a store files the record."""
        return (self.scope_path, self.id)

    @property
    def expires_at(self) -> float:
        """When the session expires unless used again (``time.time()`` seconds)."""
        return self.used_at + self.ttl_seconds

    def binding(self) -> bytes:
        """What the MAC covers: who the state belongs to, and what made it."""
        fields = {
            "id": self.id,
            "version": self.version,
            "scope_path": self.scope_path,
            "profile": self.profile,
            "digest": self.digest,
            **VERSIONS,
        }
        return json.dumps(fields, sort_keys=True, ensure_ascii=True).encode("ascii")

    @classmethod
    def new(
        cls, *, id: str, scope_path: str, profile: str, ttl_seconds: float, now: float
    ) -> SessionRecord:
        """A session with nothing saved yet (version 0)."""
        return cls(
            id=id,
            scope_path=scope_path,
            profile=profile,
            version=0,
            state=b"",
            digest=digest(b""),
            names=(),
            dropped=(),
            ttl_seconds=ttl_seconds,
            created_at=now,
            used_at=now,
        )


def digest(state: bytes) -> str:
    return hashlib.sha256(state).hexdigest()


class SessionStore:
    """The interface of a session store, with the binding every store shares.

    ``secret`` (at least 16 bytes) is the HMAC key; without one a random key is made (it
    lives as long as the store). ``clock`` gives the time (``time.time``). Subclasses keep
    the records: :meth:`_get`, :meth:`_put`, :meth:`_delete` (thread-safe; a file store
    runs them off the event loop)."""

    offloads: bool = False
    """Whether the store's storage calls block (files): they then run in a worker thread."""

    def __init__(
        self, *, secret: bytes | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        if secret is not None and (not isinstance(secret, bytes) or len(secret) < 16):
            raise UsageError("secret must be at least 16 bytes")
        if not callable(clock):
            raise UsageError("clock must be a callable returning seconds")
        self._key = secret if secret is not None else secrets.token_bytes(32)
        self.clock = clock
        self._gone: OrderedDict[SessionKey, str] = OrderedDict()
        self._gone_lock = threading.Lock()

    # -- binding ------------------------------------------------------------------------

    def sign(self, record: SessionRecord) -> SessionRecord:
        """``record`` with its MAC: the binding of its state to its id, version, scope,
        profile and the ptc and Python versions, under this store's key."""
        mac = hmac.new(self._key, record.binding(), hashlib.sha256).hexdigest()
        return replace(record, mac=mac)

    def verify(self, record: SessionRecord, *, rehash: bool) -> None:
        """Raise :class:`ptc.SessionError` unless ``record`` is bound to itself by this
        store's key (``rehash``: also check the state's bytes against its digest)."""
        expected = hmac.new(self._key, record.binding(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, record.mac):
            raise SessionError(
                f"the stored state of session {record.id!r} fails its binding (another "
                "session's, scope's, profile's or interpreter's, or changed at rest); refused"
            )
        if rehash and not hmac.compare_digest(digest(record.state), record.digest):
            raise SessionError(
                f"the stored state of session {record.id!r} was changed at rest; refused"
            )

    # -- records ------------------------------------------------------------------------

    def load(self, key: SessionKey) -> SessionRecord | None:
        """The live record of ``key``, verified; ``None`` when there is none (see
        :meth:`gone`). An expired one is removed here."""
        record = self._get(key)
        if record is None:
            return None
        self.verify(record, rehash=self.offloads)
        if record.expires_at <= self.clock():
            idle = record.ttl_seconds
            self.remove(key, f"expired after {idle:g} s without a run (ttl_seconds={idle:g})")
            return None
        return record

    def alive(self, key: SessionKey) -> bool:
        """Whether the store has a session of ``key`` that has not expired (its state is
        neither read nor checked: that happens when a run loads it)."""
        record = self._head(key)
        return record is not None and record.expires_at > self.clock()

    def save(self, record: SessionRecord) -> SessionRecord:
        """Sign and keep ``record`` (replacing the key's previous one); the signed record."""
        signed = self.sign(record)
        self._put(signed)
        with self._gone_lock:
            self._gone.pop(record.key, None)
        return signed

    def remove(self, key: SessionKey, reason: str) -> None:
        """Forget the session of ``key``; :meth:`gone` says ``reason`` for a while."""
        self._delete(key)
        with self._gone_lock:
            self._gone[key] = reason
            self._gone.move_to_end(key)
            while len(self._gone) > _GONE_REMEMBERED:
                self._gone.popitem(last=False)

    def gone(self, key: SessionKey) -> str | None:
        """Why the session of ``key`` is no longer here (closed, expired, evicted), if this
        store still remembers; ``None`` otherwise."""
        with self._gone_lock:
            return self._gone.get(key)

    # -- storage (subclasses) -----------------------------------------------------------

    def _get(self, key: SessionKey) -> SessionRecord | None:
        raise NotImplementedError

    def _head(self, key: SessionKey) -> SessionRecord | None:
        """The record without needing its state (a file store reads only the header)."""
        return self._get(key)

    def _put(self, record: SessionRecord) -> None:
        raise NotImplementedError

    def _delete(self, key: SessionKey) -> None:
        raise NotImplementedError


class MemorySessionStore(SessionStore):
    """Sessions in memory (the runtime's default), at most ``max_sessions`` of them and
    ``max_bytes`` of state together: past either, the least recently used sessions are
    evicted (a run on one is ``SESSION_EXPIRED`` and says it was evicted, and why)."""

    def __init__(
        self,
        *,
        max_sessions: int = 1024,
        max_bytes: int = 512 * 1024 * 1024,
        secret: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(secret=secret, clock=clock)
        for label, value in (("max_sessions", max_sessions), ("max_bytes", max_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{label} must be an int >= 1")
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._records: OrderedDict[SessionKey, SessionRecord] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._records)

    @property
    def bytes(self) -> int:
        """The state bytes kept, all sessions together."""
        return self._bytes

    def _get(self, key: SessionKey) -> SessionRecord | None:
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                self._records.move_to_end(key)
            return record

    def _put(self, record: SessionRecord) -> None:
        evicted: list[SessionKey] = []
        with self._lock:
            old = self._records.pop(record.key, None)
            self._bytes -= len(old.state) if old is not None else 0
            self._records[record.key] = record
            self._bytes += len(record.state)
            while len(self._records) > 1 and (
                len(self._records) > self.max_sessions or self._bytes > self.max_bytes
            ):
                key, dropped = self._records.popitem(last=False)
                self._bytes -= len(dropped.state)
                evicted.append(key)
        for key in evicted:
            self.remove(
                key,
                "evicted: the session store keeps at most "
                f"{self.max_sessions} sessions and {self.max_bytes} bytes of state, "
                "the least recently used go first",
            )

    def _delete(self, key: SessionKey) -> None:
        with self._lock:
            old = self._records.pop(key, None)
            if old is not None:
                self._bytes -= len(old.state)
