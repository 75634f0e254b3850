"""Session stores: the HMAC binding of a state to its session, the file format read field by
field (never unpickled), a file changed at rest refused, eviction and expiry."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import ptc
from ptc._sessions._session_store import SessionRecord, digest


def record(**changes: Any) -> SessionRecord:
    base = SessionRecord.new(
        id="s_1", scope_path="root/a", profile="python", ttl_seconds=60.0, now=100.0
    )
    state = b"opaque \x00 bytes"
    return dataclasses.replace(
        base, version=3, state=state, digest=digest(state), names=("x",), **changes
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_record_keeps_its_binding_and_any_change_breaks_it() -> None:
    store = ptc.MemorySessionStore(clock=Clock())
    signed = store.save(record())
    store.verify(signed, rehash=True)
    changes: tuple[dict[str, Any], ...] = (
        {"id": "s_2"},
        {"scope_path": "root/b"},
        {"profile": "restricted"},
        {"version": 4},
        {"digest": digest(b"other")},
    )
    for change in changes:
        with pytest.raises(ptc.SessionError, match="fails its binding"):
            store.verify(dataclasses.replace(signed, **change), rehash=False)
    with pytest.raises(ptc.SessionError, match="changed at rest"):
        store.verify(dataclasses.replace(signed, state=b"swapped"), rehash=True)


def test_another_stores_key_does_not_verify() -> None:
    one, other = ptc.MemorySessionStore(), ptc.MemorySessionStore()
    with pytest.raises(ptc.SessionError):
        other.verify(one.save(record()), rehash=False)


def test_the_binding_names_the_ptc_and_python_versions() -> None:
    binding = record().binding().decode()
    assert '"ptc":' in binding and '"python":' in binding


def test_expiry_is_sliding_and_says_why() -> None:
    clock = Clock()
    store = ptc.MemorySessionStore(clock=clock)
    store.save(record(used_at=100.0))
    clock.now = 159.0
    assert store.load(("root/a", "s_1")) is not None
    clock.now = 160.0
    assert store.load(("root/a", "s_1")) is None
    assert store.gone(("root/a", "s_1")) == "expired after 60 s without a run (ttl_seconds=60)"


def test_memory_store_bounds_bytes_too() -> None:
    store = ptc.MemorySessionStore(max_bytes=40)
    store.save(record(id="a"))
    store.save(record(id="b"))
    store.save(record(id="c"))  # 3 x 14 bytes > 40: the least recently used goes
    assert len(store) == 2 and store.bytes == 28
    assert "evicted" in (store.gone(("root/a", "a")) or "")


@pytest.mark.parametrize("bad", [{"max_sessions": 0}, {"max_bytes": -1}, {"max_sessions": True}])
def test_memory_store_bounds_are_checked(bad: dict[str, object]) -> None:
    with pytest.raises(ptc.UsageError):
        ptc.MemorySessionStore(**bad)  # type: ignore[arg-type]


def test_a_file_store_keeps_sessions_across_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    first = ptc.FileSessionStore(tmp_path, clock=clock)
    first.save(record())
    again = ptc.FileSessionStore(tmp_path, clock=clock)  # a restarted host: same key file
    loaded = again.load(("root/a", "s_1"))
    assert loaded is not None and loaded.state == b"opaque \x00 bytes" and loaded.version == 3
    assert (tmp_path / ".ptc-session-key").stat().st_mode & 0o777 == 0o600
    assert not any("s_1" in p.name or "root" in p.name for p in tmp_path.iterdir())


def _only_file(directory: Path) -> Path:
    (found,) = directory.glob("*.session")
    return found


@pytest.mark.parametrize(
    "tamper",
    [
        lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]),  # a state byte
        lambda raw: raw[:-3],  # truncated
        lambda raw: raw + b"x",  # longer
        lambda raw: raw.replace(b'"version": 3', b'"version": 4'),  # the header
        lambda raw: raw.replace(b'"root/a"', b'"root/b"'),  # moved to another scope
        lambda raw: b"\x80\x04K\x01." + raw,  # a pickle in front: never unpickled
        lambda raw: b"{}\n",
    ],
)
def test_a_file_changed_at_rest_is_refused(tmp_path: Path, tamper: object) -> None:
    store = ptc.FileSessionStore(tmp_path, clock=Clock())
    store.save(record())
    file = _only_file(tmp_path)
    file.write_bytes(tamper(file.read_bytes()))  # type: ignore[operator]
    with pytest.raises(ptc.SessionError, match="refused|corrupt"):
        store.load(("root/a", "s_1"))


def test_a_file_of_another_key_is_refused(tmp_path: Path) -> None:
    ptc.FileSessionStore(tmp_path, secret=b"k" * 16).save(record())
    with pytest.raises(ptc.SessionError, match="fails its binding"):
        ptc.FileSessionStore(tmp_path, secret=b"j" * 16).load(("root/a", "s_1"))
