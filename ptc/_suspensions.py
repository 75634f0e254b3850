"""Suspended runs: what was recorded when a program's call was deferred, and where it is kept.

A :class:`Suspension` is plain data (JSON, never pickled): the program, the scope it ran in,
every call that completed before the pause (name, arguments and the reply the program got),
the call awaiting approval, and what the paused run showed (its output and ``meta``). A store
keeps suspensions until they are resumed once, bound to their scope, until they expire, and
finds them by token or by the ``run_code`` call id they paused (an agent framework knows its
tool call ids, not ptc's tokens):

- :class:`SuspensionStore` keeps them in memory (the runtime's default);
- :class:`FileSuspensionStore` keeps one JSON file per suspension under a directory, written
  atomically and signed with an HMAC key, so a restarted host can resume them and a file that
  was changed, truncated or replaced is refused, never run.

Tokens are 128-bit random strings; a file store names its files by a hash of the token (and
its call-id index files by a hash of scope path and call id), so listing the directory
reveals none.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import anyio.to_thread

from ._errors import SuspensionError, UsageError
from ._json import JSON

__all__ = (
    "DEFAULT_TTL_SECONDS",
    "FileSuspensionStore",
    "PendingApproval",
    "RecordedCall",
    "Suspension",
    "SuspensionStore",
    "new_token",
)

DEFAULT_TTL_SECONDS: Final = 24 * 3600.0
_FORMAT: Final = "ptc-suspension"
_VERSION: Final = 1
_KEY_FILE: Final = ".ptc-suspension-key"
_MAX_FILE_BYTES: Final = 64 * 1024 * 1024


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

    def as_json(self) -> dict[str, Any]:
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
    (:meth:`_index`, :meth:`_unindex`, :meth:`_indexed`)."""

    def __init__(self, *, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
            raise UsageError("ttl_seconds must be a number")
        if not 0 < ttl_seconds < 10 * 365 * 86400:
            raise UsageError("ttl_seconds must be positive and under ten years")
        self.ttl_seconds = float(ttl_seconds)
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
        return found if found.expires_at > time.time() else None

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
            if found.expires_at <= time.time():
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


class FileSuspensionStore(SuspensionStore):
    """Suspended runs kept as signed JSON files in ``path`` (created if missing), so a
    restarted host can resume them.

    ``secret`` signs every file (HMAC-SHA256); without it a random key is created once in
    ``path/.ptc-suspension-key`` (mode 0600). A file that fails its signature or its schema
    is refused with :class:`ptc.SuspensionError` and never run.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        secret: bytes | None = None,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
    ) -> None:
        super().__init__(ttl_seconds=ttl_seconds)
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        if secret is not None and (not isinstance(secret, bytes) or len(secret) < 16):
            raise UsageError("secret must be at least 16 bytes")
        self._key = secret if secret is not None else _load_or_create_key(self.path)

    def _file(self, token: str, suffix: str = ".json") -> Path:
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
        return self.path / f"{digest}{suffix}"

    def _put(self, suspension: Suspension) -> None:
        record = suspension.as_json()
        body = _canonical(record)
        envelope = {
            "format": _FORMAT,
            "version": _VERSION,
            "record": record,
            "mac": hmac.new(self._key, body, hashlib.sha256).hexdigest(),
        }
        _write_atomically(self._file(suspension.token), json.dumps(envelope).encode())

    def _peek(self, token: str) -> Suspension | None:
        file = self._file(token)
        try:
            with open(file, "rb") as fh:
                raw = fh.read(_MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SuspensionError(f"the suspension file cannot be read: {exc}") from exc
        if len(raw) > _MAX_FILE_BYTES:
            raise SuspensionError("the suspension file is too large to be a record")
        try:
            envelope = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise SuspensionError("the suspension file is corrupt (not JSON)") from exc
        if (
            type(envelope) is not dict
            or set(envelope) != {"format", "version", "record", "mac"}
            or envelope["format"] != _FORMAT
            or envelope["version"] != _VERSION
            or type(envelope["mac"]) is not str
        ):
            raise SuspensionError("the suspension file is corrupt (not a suspension record)")
        expected = hmac.new(self._key, _canonical(envelope["record"]), hashlib.sha256)
        if not hmac.compare_digest(expected.hexdigest(), envelope["mac"]):
            raise SuspensionError(
                "the suspension file was changed after it was written (signature mismatch); "
                "it is refused"
            )
        return Suspension.from_json(envelope["record"])

    def _pop(self, token: str) -> bool:
        # rename() is atomic: of two hosts taking the same token, one wins.
        claimed = self._file(token, f".claimed-{os.getpid()}-{threading.get_ident()}")
        try:
            os.rename(self._file(token), claimed)
        except FileNotFoundError:
            return False
        claimed.unlink()
        return True

    def _was_used(self, token: str) -> bool:
        return self._file(token, ".used").exists()

    def _mark_used(self, token: str) -> None:
        _write_atomically(self._file(token, ".used"), b"")

    def _call_file(self, scope_path: str, call_id: str) -> Path:
        key = f"{scope_path}\0{call_id}".encode("utf-8", "surrogatepass")
        return self.path / f"{hashlib.sha256(key).hexdigest()}.call"

    def _index(self, suspension: Suspension) -> None:
        # Only a token: whatever it points at is read and verified like any record.
        token = suspension.token.encode("utf-8", "surrogatepass")
        _write_atomically(self._call_file(suspension.scope_path, suspension.call_id), token)

    def _unindex(self, suspension: Suspension) -> None:
        file = self._call_file(suspension.scope_path, suspension.call_id)
        with contextlib.suppress(OSError):
            if file.read_bytes().decode("utf-8", "replace") == suspension.token:
                file.unlink()

    def _indexed(self, scope_path: str, call_id: str) -> str | None:
        try:
            with open(self._call_file(scope_path, call_id), "rb") as fh:
                raw = fh.read(256)
        except OSError:
            return None
        token = raw.decode("utf-8", "replace")
        return token or None


def _canonical(record: object) -> bytes:
    return json.dumps(
        record, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _load_or_create_key(directory: Path) -> bytes:
    file = directory / _KEY_FILE
    try:
        key = file.read_bytes()
    except FileNotFoundError:
        key = secrets.token_bytes(32)
        try:
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it first
            key = file.read_bytes()
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(key)
    if len(key) < 16:
        raise SuspensionError(f"the suspension key {file} is too short; delete it to renew")
    return key
