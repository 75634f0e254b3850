"""FakeBackend: the in-process backend other packages' tests run code mode on."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import anyio
import pytest

from tests.worker.test_child_runtime import SDK
from worker import (
    DIMENSIONS,
    CallReply,
    CallRequest,
    Limits,
    Profile,
    RunOutcome,
    RunRequest,
    StdoutListener,
    SubprocessBackend,
    WorkerBackend,
    WorkerError,
)
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio


class Host:
    """Records every batch and answers echo/add/fail like the child-runtime tests do."""

    def __init__(self) -> None:
        self.batches: list[list[CallRequest]] = []

    async def __call__(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
        self.batches.append(list(calls))
        replies = []
        for call in calls:
            if call.tool == "echo":
                replies.append(CallReply.success(call.arguments))
            elif call.tool == "add":
                replies.append(CallReply.success(call.arguments["a"] + call.arguments["b"]))
            else:
                replies.append(CallReply.failure("DENIED", "not allowed"))
        return replies


async def run(
    code: str,
    *,
    profile: Profile = "python",
    limits: Limits | None = None,
    host: Host | None = None,
    on_stdout: StdoutListener | None = None,
    abort: anyio.Event | None = None,
) -> RunOutcome:
    request = RunRequest(code=code, sdk_module=SDK, profile=profile, limits=limits or Limits())
    async with FakeBackend() as backend:
        return await backend.run(request, on_calls=host or Host(), on_stdout=on_stdout, abort=abort)


async def test_value_calls_and_output() -> None:
    host = Host()
    chunks: list[str] = []
    outcome = await run(
        "print('hi')\nx = tools.add(a=1, b=2)\nx * 2", host=host, on_stdout=chunks.append
    )
    assert outcome.ok and outcome.value == 6 and outcome.kind is None
    assert outcome.output.text == "hi\n" and "".join(chunks) == "hi\n"
    assert [c.id for b in host.batches for c in b] == [1]
    assert outcome.stats.calls == 1


async def test_enforcement_is_none_everywhere_and_probe_agrees() -> None:
    outcome = await run("1")
    assert set(outcome.enforcement) == set(DIMENSIONS)
    assert {e.level for e in outcome.enforcement.values()} == {"none"}
    assert FakeBackend().probe() == outcome.enforcement


@pytest.mark.parametrize("profile", ["python", "restricted"])
async def test_both_profiles_share_semantics(profile: Profile) -> None:
    code = textwrap.dedent(
        """
        def f(x):
            print('f', x)
            return x + 1
        try:
            tools.fail()
        except ToolCallError as e:
            print(e.code)
        f(tools.add.map([{'a': 1, 'b': 1}])[0])
        """
    )
    outcome = await run(code, profile=profile)
    assert outcome.value == 3
    assert outcome.output.text == "DENIED\nf 2\n"


@pytest.mark.parametrize(
    ("code", "profile", "kind"),
    [
        ("x = (", "python", "syntax"),
        ("1/0", "python", "exception"),
        ("return {1}", "python", "invalid-result"),
        ("import json\njson.codecs", "restricted", "policy"),
        ("raise MemoryError", "python", "memory-limit"),
    ],
)
async def test_failure_kinds(code: str, profile: Profile, kind: str) -> None:
    outcome = await run(code, profile=profile)
    assert not outcome.ok and outcome.kind == kind


async def test_exception_detail_has_program_frames_only() -> None:
    outcome = await run("a = 1\ntools.fail()")
    assert 'File "<program>", line 2, in <module>' in outcome.detail
    assert "testing.py" not in outcome.detail and "<sdk>" not in outcome.detail


async def test_result_size_limit() -> None:
    outcome = await run("'x' * 100", limits=Limits(result_bytes=50))
    assert outcome.kind == "invalid-result" and "result_bytes" in outcome.detail


async def test_call_limit() -> None:
    outcome = await run("for i in range(5):\n    tools.echo(i=i)", limits=Limits(max_calls=2))
    assert outcome.kind == "call-limit"
    assert outcome.stats.calls == 2


async def test_output_is_truncated_head_and_tail_and_stream_cap_stops() -> None:
    outcome = await run("for i in range(100):\n    print(i)", limits=Limits(output_bytes=20))
    assert outcome.ok and outcome.output.truncated
    assert outcome.output.text.startswith("0\n1\n") and outcome.output.text.endswith("99\n")
    flood = await run(
        "while True:\n    print('x' * 50)", limits=Limits(output_bytes=100, stream_bytes=1000)
    )
    assert flood.kind == "output-limit"
    assert flood.output.total_bytes > 1000 - 51


async def test_wall_clock_returns_timeout_with_output_so_far() -> None:
    class Stuck(Host):
        """Holds the program's call until the wall clock ends the run."""

        async def __call__(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
            self.batches.append(list(calls))  # the program printed before it called
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    host = Stuck()
    code = "print('started')\ntools.echo()\nprint('never')"
    outcome = await run(code, limits=Limits(wall_seconds=1), host=host)
    assert outcome.kind == "timeout"
    assert len(host.batches) == 1
    assert outcome.output.text == "started\n"


async def test_abort_event_ends_the_run() -> None:
    abort = anyio.Event()

    class Slow(Host):
        async def __call__(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
            abort.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    outcome = await run("print('a')\ntools.echo()", host=Slow(), abort=abort)
    assert outcome.kind == "abort" and outcome.output.text == "a\n"


async def test_concurrent_runs_keep_their_output_apart() -> None:
    outcomes: dict[int, str] = {}

    async def one(i: int) -> None:
        result = await run(f"for _ in range(20):\n    print({i})\n    tools.echo()")
        outcomes[i] = result.output.text

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(one, i)
    assert outcomes == {i: f"{i}\n" * 20 for i in range(5)}


async def test_host_handler_exception_propagates() -> None:
    class Broken(Host):
        async def __call__(self, calls: Sequence[CallRequest]) -> Sequence[CallReply]:
            raise LookupError("host bug")

    with pytest.raises(LookupError):
        await run("tools.echo()", host=Broken())


async def test_cancelling_the_caller_returns_without_waiting_for_the_program() -> None:
    # The program sleeps far past the guard: waiting for its thread would trip fail_after.
    with anyio.fail_after(10):
        with anyio.move_on_after(0.05) as scope:
            await run("import time\ntime.sleep(30)")
    assert scope.cancelled_caught


# --- the same exceptions as a real backend ---------------------------------------------------


def _backend(kind: str) -> WorkerBackend:
    return FakeBackend() if kind == "fake" else SubprocessBackend()


BACKENDS = ["fake", pytest.param("subprocess", marks=pytest.mark.needs_root)]


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_closed_backend_raises_worker_error_like_a_real_one(kind: str) -> None:
    backend = _backend(kind)
    await backend.aclose()
    request = RunRequest(code="1", sdk_module=SDK, profile="python", limits=Limits())
    with pytest.raises(WorkerError, match="backend is closed"):
        await backend.run(request, on_calls=Host())


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_handler_answering_too_few_calls_is_a_worker_error_like_a_real_ones(
    kind: str,
) -> None:
    async def too_few(calls: Sequence[CallRequest]) -> Sequence[CallReply]:
        return []

    request = RunRequest(code="tools.echo(n=1)", sdk_module=SDK, limits=Limits(wall_seconds=10))
    async with _backend(kind) as backend:
        with pytest.raises(WorkerError, match="handler returned 0 replies for 1"):
            await backend.run(request, on_calls=too_few)
