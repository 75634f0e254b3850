"""Suspended runs kept as files: :class:`FileSuspensionStore`, one signed JSON file per
suspension under a directory, so a restarted host can resume them.

Each record is written atomically and signed with an HMAC key; a file that was changed,
truncated or replaced is refused, never run. Files are named by a hash of the token (and
the call-id index files by a hash of scope path and call id), so listing the directory
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
from collections.abc import Callable
from pathlib import Path
from typing import Final

from .._errors import SuspensionError, UsageError
from ._suspensions import DEFAULT_TTL_SECONDS, Suspension, SuspensionStore

__all__ = ("FileSuspensionStore", "load_or_create_key", "write_atomically")

_FORMAT: Final = "ptc-suspension"
_VERSION: Final = 1
_KEY_FILE: Final = ".ptc-suspension-key"
_MAX_FILE_BYTES: Final = 64 * 1024 * 1024


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
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(ttl_seconds=ttl_seconds, clock=clock)
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        if secret is not None and (not isinstance(secret, bytes) or len(secret) < 16):
            raise UsageError("secret must be at least 16 bytes")
        self._key = secret if secret is not None else load_or_create_key(self.path, _KEY_FILE)

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
        write_atomically(self._file(suspension.token), json.dumps(envelope).encode())

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
        write_atomically(self._file(token, ".used"), b"")

    def _call_file(self, scope_path: str, call_id: str) -> Path:
        key = f"{scope_path}\0{call_id}".encode("utf-8", "surrogatepass")
        return self.path / f"{hashlib.sha256(key).hexdigest()}.call"

    def _index(self, suspension: Suspension) -> None:
        # Only a token: whatever it points at is read and verified like any record.
        token = suspension.token.encode("utf-8", "surrogatepass")
        write_atomically(self._call_file(suspension.scope_path, suspension.call_id), token)

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


def write_atomically(path: Path, *parts: bytes) -> None:
    """``path`` holds ``parts`` joined, or is unchanged: written beside it, synced, renamed."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            for part in parts:
                fh.write(part)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_or_create_key(directory: Path, name: str) -> bytes:
    """The HMAC key in ``directory/name``, created (random, mode 0600) the first time."""
    file = directory / name
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
        raise SuspensionError(f"the key {file} is too short; delete it to renew")
    return key
