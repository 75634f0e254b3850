"""Sessions kept as files: :class:`FileSessionStore`, one signed file per session under a
directory, so a restarted host can go on with them.

A file is a JSON header line (the record but its state, with the MAC) and then the
state's bytes as they are. Nothing in it is ever unpickled on the host: the header is
JSON read field by field, the state opaque bytes checked against its digest and binding
(a file changed, truncated or moved to another session is refused with
:class:`ptc.SessionError` and its state never reaches a worker). Files are written
atomically and named by a hash of scope path and session id, so listing the directory
reveals neither.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from .._errors import SessionError
from .._suspend._suspension_files import load_or_create_key, write_atomically
from ._session_store import SessionKey, SessionRecord, SessionStore

__all__ = ("FileSessionStore",)

_FORMAT: Final = "ptc-session/1"
_KEY_FILE: Final = ".ptc-session-key"
_MAX_HEADER_BYTES: Final = 16 * 1024 * 1024
_FIELDS: Final[dict[str, Any]] = {
    "format": lambda v: v == _FORMAT,
    "id": lambda v: type(v) is str,
    "scope_path": lambda v: type(v) is str,
    "profile": lambda v: v in ("python", "restricted"),
    "version": lambda v: type(v) is int and v >= 0,
    "digest": lambda v: type(v) is str,
    "size": lambda v: type(v) is int and v >= 0,
    "names": lambda v: type(v) is list and all(type(n) is str for n in v),
    "dropped": lambda v: type(v) is list
    and all(type(d) is list and len(d) == 2 and all(type(x) is str for x in d) for d in v),
    "ttl_seconds": lambda v: type(v) in (int, float),
    "created_at": lambda v: type(v) in (int, float),
    "used_at": lambda v: type(v) in (int, float),
    "mac": lambda v: type(v) is str,
}


class FileSessionStore(SessionStore):
    """Sessions kept as signed files in ``path`` (created if missing), so a restarted host
    can go on with them (see the module docstring).

    ``secret`` signs every file (HMAC-SHA256); without it a random key is created once in
    ``path/.ptc-session-key`` (mode 0600) and read again after a restart."""

    offloads = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        secret: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        super().__init__(secret=secret or load_or_create_key(self.path, _KEY_FILE), clock=clock)

    def _file(self, key: SessionKey) -> Path:
        name = hashlib.sha256("\0".join(key).encode("utf-8", "surrogatepass")).hexdigest()
        return self.path / f"{name}.session"

    def _get(self, key: SessionKey) -> SessionRecord | None:
        return self._read(key, state=True)

    def _head(self, key: SessionKey) -> SessionRecord | None:
        return self._read(key, state=False)

    def _read(self, key: SessionKey, *, state: bool) -> SessionRecord | None:
        try:
            with open(self._file(key), "rb") as fh:
                fields = _header(fh.readline(_MAX_HEADER_BYTES + 1))
                data = fh.read(fields["size"] + 1) if state else b""
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SessionError(f"the session file cannot be read: {exc}") from exc
        if state and len(data) != fields["size"]:
            raise SessionError("the session file is truncated or too long; refused")
        record = SessionRecord(
            id=fields["id"],
            scope_path=fields["scope_path"],
            profile=fields["profile"],
            version=fields["version"],
            state=data,
            digest=fields["digest"],
            names=tuple(fields["names"]),
            dropped=tuple((d[0], d[1]) for d in fields["dropped"]),
            ttl_seconds=float(fields["ttl_seconds"]),
            created_at=float(fields["created_at"]),
            used_at=float(fields["used_at"]),
            mac=fields["mac"],
        )
        if record.key != key:
            raise SessionError("the session file belongs to another session; refused")
        return record

    def _put(self, record: SessionRecord) -> None:
        header = {
            "format": _FORMAT,
            "id": record.id,
            "scope_path": record.scope_path,
            "profile": record.profile,
            "version": record.version,
            "digest": record.digest,
            "size": len(record.state),
            "names": list(record.names),
            "dropped": [list(d) for d in record.dropped],
            "ttl_seconds": record.ttl_seconds,
            "created_at": record.created_at,
            "used_at": record.used_at,
            "mac": record.mac,
        }
        line = json.dumps(header, ensure_ascii=True, allow_nan=False).encode("ascii") + b"\n"
        write_atomically(self._file(record.key), line, record.state)

    def _delete(self, key: SessionKey) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._file(key).unlink()


def _header(line: bytes) -> dict[str, Any]:
    if len(line) > _MAX_HEADER_BYTES or not line.endswith(b"\n"):
        raise SessionError("the session file is corrupt (no header line); refused")
    try:
        fields = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise SessionError("the session file is corrupt (its header is not JSON)") from exc
    if type(fields) is not dict or set(fields) != set(_FIELDS):
        raise SessionError("the session file is corrupt (not a session header); refused")
    for name, check in _FIELDS.items():
        if not check(fields[name]):
            raise SessionError(f"the session file is corrupt ({name}); refused")
    return fields

