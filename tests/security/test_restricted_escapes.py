"""The restricted profile against every known escape, in-process and in real children.

The payloads (``_restricted_payloads``) try to read a canary file outside the scratch dir.
Each runs three ways: in-process through ``run_program`` (the guards alone, the fast
check), in a fully contained child, and in a child with Landlock off
(``Containment(landlock=False, require=())``): the case the profile exists for, where
only the guards stand between the program and the canary. A control run shows the
canary really is readable there under the python profile.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.security._restricted_payloads import ALL, Payload
from tests.security._support import SDK, run
from tests.worker.test_restricted import DATA_PIPELINE, DATA_PIPELINE_RESULT
from worker import Containment, Limits, RunOutcome
from worker._child._outcome import ProgramResult
from worker._child._program import run_program
from worker._host._backend import SubprocessBackend

LIMITS = Limits(wall_seconds=10, cpu_seconds=5, memory_mib=256)


class Canary:
    """A secret in a file any uid may read, outside every scratch dir."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="ptc-canary-")
        os.chmod(self.dir, 0o755)
        self.path = os.path.join(self.dir, "canary.txt")
        self.secret = f"canary-{secrets.token_hex(8)}"
        with open(self.path, "w", encoding="utf-8") as fh:
            fh.write(self.secret)
        os.chmod(self.path, 0o644)

    def program(self, payload: Payload) -> str:
        return payload.code.replace("CANARY", repr(self.path))

    def leaked(self, *texts: object) -> bool:
        return any(self.secret in str(text) for text in texts)


@pytest.fixture(scope="module")
def canary() -> Iterator[Canary]:
    c = Canary()
    yield c
    shutil.rmtree(c.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class _EchoTransport:
    def call_batch(self, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, Any]]:
        return [(True, dict(arguments)) for _, arguments in calls]


def sdk_names() -> dict[str, Any]:
    """``tools``, ``parallel`` and ``ToolCallError`` as the child builds them."""
    namespace: dict[str, Any] = {"__transport__": _EchoTransport(), "__name__": "ptc_sdk"}
    exec(compile(SDK, "<sdk>", "exec"), namespace)
    return {k: namespace[k] for k in ("tools", "parallel", "ToolCallError")}


def run_in_process(code: str) -> tuple[ProgramResult, str]:
    out: list[str] = []
    result = run_program(
        code, profile="restricted", names=sdk_names(), result_bytes=1 << 20, write=out.append
    )
    return result, "".join(out)


def check(payload: Payload, ok: bool, kind: str | None, value: object, detail: str) -> None:
    got = "ok" if ok else kind
    assert got == payload.expect, f"{payload.id}: ended as {got}: {value!r} {detail[-500:]}"
    if payload.expect == "exception":
        # blocked by absence or by the library's own checks, never by reaching something
        assert any(
            name in detail
            for name in (
                "NameError",
                "ValueError",
                "TypeError",
                "AttributeError",
                "ModuleNotFoundError",
            )
        ), detail


def test_the_corpus_is_large_and_its_ids_are_unique() -> None:
    ids = [p.id for p in ALL]
    assert len(ids) == len(set(ids))
    assert len(ALL) >= 100


@pytest.mark.parametrize("payload", ALL, ids=[p.id for p in ALL])
def test_payload_in_process(payload: Payload, canary: Canary) -> None:
    result, out = run_in_process(canary.program(payload))
    assert not canary.leaked(result.value, result.detail, out), payload.id
    check(payload, result.ok, result.kind, result.value, result.detail)


def _check_outcome(payload: Payload, canary: Canary, out: RunOutcome) -> None:
    assert not canary.leaked(out.value, out.detail, out.output.text), payload.id
    check(payload, out.ok, out.kind, out.value, out.detail)


# One backend at a time: two live backends in one process name their per-run cgroups
# alike (pid + counter), so the second one's runs would lose their memory cgroup.
@pytest.mark.anyio
class TestInAContainedChild:
    @pytest.fixture(scope="class")
    async def backend(self) -> AsyncIterator[SubprocessBackend]:
        async with SubprocessBackend(Containment(pool_size=1)) as b:
            yield b

    async def test_control_landlock_keeps_the_canary_from_python(
        self, canary: Canary, backend: SubprocessBackend
    ) -> None:
        out = await run(backend, f"return open({canary.path!r}).read()", LIMITS)
        assert out.kind == "exception", out.detail
        assert "PermissionError" in out.detail

    @pytest.mark.parametrize("payload", ALL, ids=[p.id for p in ALL])
    async def test_payload(
        self, payload: Payload, canary: Canary, backend: SubprocessBackend
    ) -> None:
        out = await run(backend, canary.program(payload), LIMITS, profile="restricted")
        _check_outcome(payload, canary, out)

    async def test_a_realistic_program_still_works(self, backend: SubprocessBackend) -> None:
        out = await run(backend, DATA_PIPELINE, LIMITS, profile="restricted")
        assert out.ok, out.detail
        assert out.value == DATA_PIPELINE_RESULT


@pytest.mark.anyio
class TestWithoutLandlock:
    """Containment(landlock=False, require=()): only the guards protect the canary."""

    @pytest.fixture(scope="class")
    async def backend(self) -> AsyncIterator[SubprocessBackend]:
        relaxed = Containment(landlock=False, require=frozenset(), pool_size=1)
        async with SubprocessBackend(relaxed) as b:
            yield b

    async def test_control_python_reads_the_canary(
        self, canary: Canary, backend: SubprocessBackend
    ) -> None:
        out = await run(backend, f"return open({canary.path!r}).read()", LIMITS)
        assert out.value == canary.secret, out.detail

    @pytest.mark.parametrize("payload", ALL, ids=[p.id for p in ALL])
    async def test_payload(
        self, payload: Payload, canary: Canary, backend: SubprocessBackend
    ) -> None:
        out = await run(backend, canary.program(payload), LIMITS, profile="restricted")
        _check_outcome(payload, canary, out)

    async def test_a_realistic_program_still_works(self, backend: SubprocessBackend) -> None:
        out = await run(backend, DATA_PIPELINE, LIMITS, profile="restricted")
        assert out.ok, out.detail
        assert out.value == DATA_PIPELINE_RESULT
