"""Sessions on real contained workers: SDK names rebound each run, fork isolation of state
and files, the size cap, a file store across a restart and a tampered file refused, and a
``__reduce__`` payload that the host never deserializes."""

from __future__ import annotations

import marshal
import pickle
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import ptc
from tests._typing import data

pytestmark = pytest.mark.anyio

RELAXED = ptc.Containment(require=frozenset(), pool_size=1)


def make_runtime(**options: Any) -> ptc.ToolRuntime:
    options.setdefault("containment", RELAXED)
    runtime = ptc.ToolRuntime(default_mode="code", **options)

    @runtime.tool
    def fetch(day: str) -> list[dict[str, Any]]:
        """The rows of a day."""
        return [{"day": day, "v": v} for v in (1, 4, 5)]

    return runtime


@pytest.fixture
async def runtime() -> AsyncIterator[ptc.ToolRuntime]:
    async with make_runtime() as rt:
        yield rt


def meta(result: ptc.ToolResult) -> dict[str, Any]:
    found = data(result.meta)["session"]
    assert isinstance(found, dict)
    return found


def value(result: ptc.ToolResult) -> Any:
    assert not result.is_error, result.text
    return data(result.value)["result"]


async def test_sdk_names_are_rebound_to_each_runs_sdk(runtime: ptc.ToolRuntime) -> None:
    session = runtime.root.session()
    first = await session.run_code(
        "get = tools.fetch\nfail = ToolCallError\ndef days(*names):\n"
        "    return [tools.fetch(day=n)[0]['day'] for n in names]"
    )
    assert meta(first)["names"] == ["get", "fail", "days"] and meta(first)["dropped"] == []
    again = await session.run_code(
        "return [get(day='tue')[0]['day'], days('wed', 'thu'), fail is ToolCallError]"
    )
    assert value(again) == ["tue", ["wed", "thu"], True]


async def test_a_fork_gets_the_same_state_and_files_then_goes_its_own_way(
    runtime: ptc.ToolRuntime,
) -> None:
    session = runtime.root.session()
    await session.run_code("notes = ['a']\nopen('log.txt', 'w').write('a\\n')")
    branch = await session.fork()
    await branch.run_code("notes.append('b')\nopen('log.txt', 'a').write('b\\n')")
    await session.run_code("notes.append('c')\nopen('log.txt', 'a').write('c\\n')")
    read = "return [notes, open('log.txt').read()]"
    assert value(await session.run_code(read)) == [["a", "c"], "a\nc\n"]
    assert value(await branch.run_code(read)) == [["a", "b"], "a\nb\n"]


async def test_a_state_over_session_mib_keeps_the_previous_version() -> None:
    async with make_runtime() as rt:
        scope = rt.scope("small")
        scope.present_as("code", limits=ptc.Limits(session_mib=1))
        session = scope.session()
        await session.run_code("keep = 1")
        over = await session.run_code("import os\nblob = os.urandom(2_000_000)\nkeep = 2")
        assert meta(over)["kept_previous"] is True and meta(over)["version"] == 1
        assert "over Limits.session_mib (1.0 MiB); the largest: blob (1.9 MiB)" in over.text
        assert value(await session.run_code("return keep")) == 1


async def test_a_file_store_keeps_state_and_files_across_a_restart(tmp_path: Path) -> None:
    store = tmp_path / "sessions"
    async with make_runtime(sessions=ptc.FileSessionStore(store)) as rt:
        session = rt.root.session(ttl_seconds=3600)
        await session.run_code("total = 41\nopen('kept.txt', 'w').write('yes')")
    async with make_runtime(sessions=ptc.FileSessionStore(store)) as rt:
        again = rt.root.session(id=session.id)
        assert value(await again.run_code("return [total + 1, open('kept.txt').read()]")) == [
            42,
            "yes",
        ]


async def test_a_tampered_store_file_is_refused_and_the_runtime_goes_on(tmp_path: Path) -> None:
    store = tmp_path / "sessions"
    async with make_runtime(sessions=ptc.FileSessionStore(store)) as rt:
        session = rt.root.session()
        await session.run_code("secret = 'kept'")
    (file,) = store.glob("*.session")
    raw = file.read_bytes()
    file.write_bytes(raw[:-1] + bytes([raw[-1] ^ 0xFF]))
    async with make_runtime(sessions=ptc.FileSessionStore(store)) as rt:
        again = rt.root.session(id=session.id)
        refused = await again.run_code("return secret")
        assert refused.error is not None and refused.error.code == "SESSION_EXPIRED"
        assert "changed at rest; refused" in refused.text
        assert value(await rt.root.run_code("return 'runtime fine'")) == "runtime fine"
        fresh = await again.run_code("return 'x' in globals()", reset=True)
        assert value(fresh) is False


@pytest.fixture
def host_deserializers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every object deserializer of this (host) process, made to record a call."""
    calls: list[str] = []

    def recorder(name: str, real: Any) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return record

    for module, names in ((pickle, ("loads", "load", "Unpickler")), (marshal, ("loads", "load"))):
        for name in names:
            real = getattr(module, name)
            monkeypatch.setattr(module, name, recorder(f"{module.__name__}.{name}", real))
    yield calls


@pytest.mark.needs_root
async def test_a_reduce_payload_is_never_deserialized_by_the_host(
    tmp_path: Path, host_deserializers: list[str]
) -> None:
    canary = tmp_path / "canary"
    program = (
        "class Payload:\n"
        "    def __reduce__(self):\n"
        f"        return (open, ({str(canary)!r}, 'w'))\n"
        "payload = Payload()\nkept = 1"
    )
    async with make_runtime(containment=ptc.Containment(pool_size=1)) as rt:
        session = rt.root.session()
        saved = await session.run_code(program)
        assert meta(saved)["names"] == ["Payload", "payload", "kept"]
        again = await session.run_code("return kept")
        reopened = rt.root.session(id=session.id)
        await reopened.fork()
    assert not canary.exists()  # not by the host, and not by the contained child either
    assert host_deserializers == []
    # The child that tried to restore it was refused the host's path (Landlock), and said so.
    assert again.error is not None and "could not be restored" in again.text
