"""Frames a hostile program forges on its own channel (python profile), from a real child.

The host re-checks every frame it acts on, whatever the child runtime checked: depth and
size before any recursive processing, every string UTF-8 encodable, and log records
counted against ``stream_bytes``. Each breach ends the run as ``protocol`` (or
``output-limit`` for the stream budget) and the host carries on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import pytest

import ptc
from tests.security._support import FORGE, SHORT, run
from worker import Containment, Limits, RunOutcome
from worker._host._backend import SubprocessBackend

pytestmark = pytest.mark.anyio


@pytest.fixture
async def backend() -> AsyncIterator[SubprocessBackend]:
    async with SubprocessBackend(Containment(pool_size=1)) as b:
        yield b


def _forged(body: str, *, then: str = "os._exit(0)") -> str:
    """A program that writes ``body`` (a Python bytes expression) as a frame, then ``then``."""
    return f"{FORGE}\nforge({body})\n{then}"


async def _host_still_fine(backend: SubprocessBackend) -> None:
    assert (await run(backend, "return 'host fine'")).value == "host fine"


DEEP_DONE = "b'{\"type\":\"done\",\"ok\":true,\"value\":' + b'[' * 950 + b']' * 950 + b'}'"


async def test_a_done_nested_950_deep_is_a_protocol_error(backend: SubprocessBackend) -> None:
    out = await run(backend, _forged(DEEP_DONE))
    assert out.kind == "protocol", out
    assert "nested deeper than" in out.detail
    await _host_still_fine(backend)


async def test_a_done_nested_deep_never_reaches_the_host_as_a_recursion_error() -> None:
    async with ptc.ToolRuntime(default_mode="code", limits=SHORT) as runtime:
        result = await runtime.root.run_code(_forged(DEEP_DONE))
    assert result.error is not None and result.error.code == "CODE_RUN_FAILED"
    assert "code run failed (protocol)" in result.error.message


@pytest.mark.parametrize("depth", [201, 203, 1_000, 100_000])
async def test_values_nested_past_200_in_done_are_protocol_errors(
    backend: SubprocessBackend, depth: int
) -> None:
    body = (
        f"b'{{\"type\":\"done\",\"ok\":true,\"value\":' + b'[' * {depth} + b']' * {depth} + b'}}'"
    )
    out = await run(backend, _forged(body))
    assert out.kind == "protocol", out


async def test_a_value_200_deep_is_still_a_result(backend: SubprocessBackend) -> None:
    out = await run(backend, "v = 1\nfor _ in range(199):\n    v = [v]\nreturn v")
    assert out.ok, out.detail


async def test_a_forged_15_mib_done_is_over_result_bytes(backend: SubprocessBackend) -> None:
    body = 'b\'{"type":"done","ok":true,"value":"\' + b\'x\' * (15 << 20) + b\'"}\''
    out = await run(backend, _forged(body), Limits(wall_seconds=10, result_bytes=1 << 20))
    assert out.kind == "protocol", out
    assert "result_bytes" in out.detail
    await _host_still_fine(backend)


async def test_forged_call_arguments_over_the_cap_are_a_protocol_error(
    backend: SubprocessBackend,
) -> None:
    body = (
        'b\'{"type":"call","calls":[{"id":1,"tool":"echo","arguments":{"s":"\''
        " + b'x' * (15 << 20) + b'\"}}]}'"
    )
    out = await run(backend, _forged(body, then="import time\ntime.sleep(5)"))
    assert out.kind == "protocol", out
    assert "arguments" in out.detail


async def test_forged_call_arguments_nested_past_200_are_a_protocol_error(
    backend: SubprocessBackend,
) -> None:
    body = (
        'b\'{"type":"call","calls":[{"id":1,"tool":"echo","arguments":{"a":\''
        " + b'[' * 202 + b']' * 202 + b'}}]}'"
    )
    out = await run(backend, _forged(body, then="import time\ntime.sleep(5)"))
    assert out.kind == "protocol", out


async def test_a_forged_stdout_frame_over_stream_bytes_is_an_output_limit(
    backend: SubprocessBackend,
) -> None:
    body = 'b\'{"type":"stdout","data":"\' + b\'x\' * (2 << 20) + b\'"}\''
    limits = Limits(wall_seconds=5, output_bytes=1000, stream_bytes=1 << 20)
    out = await run(backend, _forged(body, then="import time\ntime.sleep(5)"), limits)
    assert out.kind == "output-limit", out


@pytest.mark.parametrize(
    ("body", "then"),
    [
        pytest.param(
            'b\'{"type":"done","ok":true,"value":["a\\\\ud800b", {"\\\\udfff": 1}]}\'',
            "os._exit(0)",
            id="done",
        ),
        pytest.param(
            'b\'{"type":"stdout","data":"a\\\\ud800b\\\\n"}\'',
            "_chan.detach()  # keep the channel open for the real done\nreturn 1",
            id="stdout",
        ),
    ],
)
async def test_forged_lone_surrogates_reach_the_host_replaced(
    backend: SubprocessBackend, body: str, then: str
) -> None:
    out = await run(backend, _forged(body, then=then))
    assert out.ok, out
    _assert_encodable(out)
    assert "\ufffd" in json.dumps(out.value, ensure_ascii=False) + out.output.text


def _assert_encodable(out: RunOutcome) -> None:
    text = json.dumps(out.value, ensure_ascii=False) + out.output.text + out.detail
    text.encode("utf-8")  # raises on a lone surrogate


# --- log frames (item 4) ---------------------------------------------------------------


async def test_a_logging_flood_is_an_output_limit(
    backend: SubprocessBackend, caplog: pytest.LogCaptureFixture
) -> None:
    code = "import logging\nwhile True:\n    logging.warning('x' * 10000)"
    limits = Limits(wall_seconds=10, output_bytes=1000, stream_bytes=1 << 20)
    with caplog.at_level(logging.WARNING, logger="ptc.worker"):
        out = await run(backend, code, limits)
    assert out.kind == "output-limit", out
    received = sum(len(r.getMessage()) for r in caplog.records if r.name.startswith("ptc.worker"))
    assert received <= 1 << 20


async def test_logs_and_stdout_share_the_stream_budget(backend: SubprocessBackend) -> None:
    code = (
        "import logging\nfor _ in range(60):\n    print('x' * 10000)\n"
        "    logging.warning('y' * 10000)\nreturn 'done'"
    )
    limits = Limits(wall_seconds=10, output_bytes=1000, stream_bytes=1_000_000)
    out = await run(backend, code, limits)
    assert out.kind == "output-limit", out


async def test_forged_log_frames_count_against_stream_bytes(
    backend: SubprocessBackend, caplog: pytest.LogCaptureFixture
) -> None:
    record = (
        'b\'{"type":"log","record":{"name":"x","levelno":30,"levelname":"WARNING",'
        '"msg":"\' + b\'y\' * 60000 + b\'","created":1.0}}\''
    )
    code = f"{FORGE}\nwhile True:\n    forge({record})"
    limits = Limits(wall_seconds=10, output_bytes=1000, stream_bytes=1 << 20)
    with caplog.at_level(logging.WARNING, logger="ptc.worker"):
        out = await run(backend, code, limits)
    assert out.kind == "output-limit", out
    received = sum(len(r.getMessage()) for r in caplog.records if r.name.startswith("ptc.worker"))
    assert received <= 1 << 20


async def test_one_huge_log_record_is_cut_to_the_record_cap(
    backend: SubprocessBackend, caplog: pytest.LogCaptureFixture
) -> None:
    code = "import logging\nlogging.warning('z' * 3_000_000)\nreturn 'ok'"
    limits = Limits(wall_seconds=10, stream_bytes=8 << 20)
    with caplog.at_level(logging.WARNING, logger="ptc.worker"):
        out = await run(backend, code, limits)
    assert out.ok, out.detail
    (record,) = [r for r in caplog.records if r.name.startswith("ptc.worker")]
    assert 1000 < len(record.getMessage()) <= 70_000
    assert "characters omitted" in record.getMessage()


async def test_a_forged_log_record_over_the_cap_is_a_protocol_error(
    backend: SubprocessBackend,
) -> None:
    record = (
        'b\'{"type":"log","record":{"name":"x","levelno":30,"levelname":"WARNING",'
        '"msg":"\' + b\'y\' * 3000000 + b\'","created":1.0}}\''
    )
    limits = Limits(wall_seconds=10, stream_bytes=8 << 20)
    out = await run(backend, _forged(record, then="import time\ntime.sleep(5)"), limits)
    assert out.kind == "protocol", out
