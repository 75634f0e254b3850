"""A session's state as a hostile program forges it on its own channel (python profile).

The host takes the child's ``state`` and ``saved`` frames as opaque bytes: it checks each
chunk (a raw frame, not empty, within the chunk cap), their total (within
``Limits.session_mib``) and their order (only in a run on a session, none after
``saved``, ``saved`` naming what was sent), and never parses them. Any breach ends the run
as ``protocol``; nothing of it is saved, and the host carries on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.security._support import FORGE, SDK, SHORT, echo_calls
from worker import Containment, Limits, RunOutcome, RunRequest
from worker._host._backend import SubprocessBackend
from worker._protocol._state import STATE_CHUNK_BYTES

pytestmark = pytest.mark.anyio


@pytest.fixture
async def backend() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend(Containment(require=frozenset(), pool_size=1)) as b:
        yield b


def frame(body: str) -> str:
    """A ``forge(...)`` of a JSON frame body given as Python source of a str."""
    return f"forge(({body}).encode())"


def raw(data: str) -> str:
    """A ``forge(...)`` of a raw frame (a state chunk) of ``data``, Python source of bytes."""
    return f"forge(b'\\x00' + {data})"


JSON_STATE = '\'{"type":"state","data":"eHk="}\''
SAVED = '\'{"type":"saved","bytes":%d,"names":[],"dropped":[],"problem":"%s"}\''


async def run(
    backend: SubprocessBackend, lines: list[str], *, session: bytes | None = b"", mib: int = 16
) -> RunOutcome:
    code = "\n".join([FORGE, *lines, "os._exit(0)"])
    limits = Limits(wall_seconds=SHORT.wall_seconds, memory_mib=256, session_mib=mib)
    request = RunRequest(code=code, sdk_module=SDK, limits=limits, session=session)
    return await backend.run(request, on_calls=echo_calls)


@pytest.mark.parametrize(
    ("lines", "session", "needle"),
    [
        ([raw("b'xy'")], None, "without a session"),
        ([frame(SAVED % (0, ""))], None, "without a session"),
        ([frame(JSON_STATE)], b"", "only a raw frame carries it"),
        ([raw("b''")], b"", "an empty chunk"),
        ([raw("b'abc'"), frame(SAVED % (4, ""))], b"", "4 bytes said, 3 sent"),
        ([raw("b'abc'"), frame(SAVED % (3, "too big"))], b"", "3 bytes said"),
        (
            [frame(SAVED % (0, "")), raw("b'late'")],
            b"",
            "after saved",
        ),
    ],
)
async def test_a_forged_state_out_of_order_or_malformed_is_a_protocol_error(
    backend: SubprocessBackend, lines: list[str], session: bytes | None, needle: str
) -> None:
    out = await run(backend, lines, session=session)
    assert out.kind == "protocol", out
    assert needle in out.detail
    assert out.session is None


async def test_a_state_past_session_mib_is_killed_as_it_arrives(
    backend: SubprocessBackend,
) -> None:
    out = await run(backend, [raw(f"b'x' * {STATE_CHUNK_BYTES}")], mib=1)
    assert out.kind == "protocol", out
    assert "passed 1048576 bytes" in out.detail


async def test_a_chunk_over_the_chunk_cap_is_refused(backend: SubprocessBackend) -> None:
    out = await run(backend, [raw(f"b'A' * ({STATE_CHUNK_BYTES} + 1)")])
    assert out.kind == "protocol", out
    assert "over the 4194304 cap" in out.detail


async def test_the_host_carries_on_after_a_forged_state(backend: SubprocessBackend) -> None:
    await run(backend, [frame(JSON_STATE)])
    request = RunRequest(code="x = 1\nreturn 'fine'", sdk_module=SDK, limits=SHORT, session=b"")
    out = await backend.run(request, on_calls=echo_calls)
    assert out.value == "fine" and out.session is not None and out.session.names == ("x",)
