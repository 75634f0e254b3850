"""The fidelity corpora and their scoreboard: cases, how a run is judged, ptc's runner.

Used by ``test_fidelity.py`` and by the benchmark that compares ptc with its peers
(``python -m benchmarks.fidelity``, which imports it from here: tests import no benchmark).

A case (``tests/corpora/*.json``, extracted by ``benchmarks.fidelity_extract``) is a
program and how CPython 3.11 ends it: ``success`` (no exception), ``value`` (no exception,
and this value, plus this output where the source checks it) or ``exception`` (this type
and message). A run passes a case when it ends the same way; an exception of the right
type with another message counts separately (``type``).

:func:`run_ptc` runs cases through real contained children, many per child: one
python-profile program (the *batch*) runs each case through the child's own runner
(``worker._child._program.run_program``, what every run goes through), restoring the
process-wide state a case may change between cases. A batch that does not come back
(a case blew a limit or killed its child) is split: each of its cases then runs as a
program of its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from worker import (
    CallReply,
    CallRequest,
    Limits,
    Profile,
    RunOutcome,
    RunRequest,
    WorkerBackend,
)

CORPORA_DIR = Path(__file__).resolve().parents[1] / "corpora"
CORPORA = {"monty": "monty-1.4.0.MIT.json", "smolagents": "smolagents-1.26.0.Apache-2.0.json"}
"""Corpus name -> its file in :data:`CORPORA_DIR`."""

Expect = Literal["success", "value", "exception"]
Verdict = Literal["pass", "type", "fail"]
"""``type``: an exception of the expected type with another message."""


@dataclass(frozen=True, kw_only=True)
class Case:
    id: str
    code: str
    expect: Expect
    value: Any = None
    stdout: str | None = None
    error_type: str = ""
    error_message: str = ""
    authorized_imports: list[str] = field(default_factory=list)
    """smolagents only: the imports its test authorized beyond its defaults."""

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "code": self.code, "expect": self.expect}
        if self.expect == "value":
            data["value"] = self.value
        if self.stdout is not None:
            data["stdout"] = self.stdout
        if self.expect == "exception":
            data["error_type"] = self.error_type
            data["error_message"] = self.error_message
        if self.authorized_imports:
            data["authorized_imports"] = self.authorized_imports
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Case:
        return cls(**data)


def load_corpus(name: str) -> list[Case]:
    document = json.loads((CORPORA_DIR / CORPORA[name]).read_text(encoding="utf-8"))
    return [Case.from_json(item) for item in document["cases"]]


def is_plain_json(value: Any) -> bool:
    """True for exactly dict (str keys), list, str, int, finite float, bool and None."""
    kind = type(value)
    if value is None or kind in (str, int, bool):
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(is_plain_json(v) for v in value)
    if kind is dict:
        return all(type(k) is str and is_plain_json(v) for k, v in value.items())
    return False


@dataclass(frozen=True, kw_only=True)
class Ending:
    """How a run ended, in the terms cases are judged in."""

    ok: bool
    """No exception (the value may still be missing: ``has_value``)."""
    has_value: bool = False
    value: Any = None
    stdout: str = ""
    error_type: str | None = None
    """``None`` when the run failed without a Python exception (a policy refusal, a limit)."""
    error_message: str = ""
    note: str = ""
    """What a failure says, for the scoreboard's listing."""


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def judge(case: Case, ending: Ending) -> Verdict:
    if case.expect == "exception":
        if ending.ok or ending.error_type != case.error_type:
            return "fail"
        return "pass" if ending.error_message == case.error_message else "type"
    if not ending.ok:
        return "fail"
    if case.expect == "value" and not (ending.has_value and _same_json(ending.value, case.value)):
        return "fail"
    if case.stdout is not None and ending.stdout != case.stdout:
        return "fail"
    return "pass"


_CHAIN_MARKERS = (
    "\n\nThe above exception was the direct cause of the following exception:\n\n",
    "\n\nDuring handling of the above exception, another exception occurred:\n\n",
)


def last_exception(detail: str) -> tuple[str, str]:
    """Type name and message of the last exception of a program traceback (ptc's
    ``exception`` detail: the program's frames, then ``Type: message``)."""
    block = detail
    for marker in _CHAIN_MARKERS:
        block = block.rsplit(marker, 1)[-1]
    lines = block.split("\n")
    start = 0
    if lines and lines[0].startswith("Traceback (most recent call last):"):
        start = 1
        while start < len(lines) - 1 and lines[start].startswith("  "):
            start += 1
    text = "\n".join(lines[start:])
    name, sep, message = text.partition(": ")
    if not sep and "\n" in name:
        name, _, message = name.partition("\n")
    return name, message


def ending_of_ptc(*, ok: bool, value: Any, kind: str | None, detail: str, stdout: str) -> Ending:
    """A ptc run's end (a ``ProgramResult`` or a ``RunOutcome``) as an :class:`Ending`."""
    if ok:
        return Ending(ok=True, has_value=True, value=value, stdout=stdout)
    if kind == "invalid-result":  # ran to the end; its value is not JSON
        return Ending(ok=True, stdout=stdout, note=detail[:200])
    if kind in ("exception", "memory-limit") and detail:
        name, message = last_exception(detail)
        return Ending(
            ok=False,
            error_type=name,
            error_message=message,
            stdout=stdout,
            note=f"{name}: {message}"[:300],
        )
    if kind == "syntax":
        return Ending(
            ok=False,
            error_type="SyntaxError",
            error_message=detail.split(" (line ", 1)[0],
            stdout=stdout,
            note=f"syntax: {detail}"[:300],
        )
    return Ending(ok=False, stdout=stdout, note=f"{kind}: {detail}"[:300])


# --- ptc: batches of cases in real children ---------------------------------------------

_BATCH = r"""
import decimal, io, json, sys, warnings
from worker._child._program import run_program

names = {"tools": tools, "parallel": parallel, "ToolCallError": ToolCallError}
limit = sys.getrecursionlimit()
filters = warnings.filters[:]
ends = []
for code in json.loads(CASES):
    out = []
    sink = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    real = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = sink
    decimal.setcontext(decimal.Context())
    try:
        end = run_program(code, profile=PROFILE, names=dict(names), result_bytes=1 << 20,
                          write=out.append)
    finally:
        sys.stdout, sys.stderr = real
        sys.setrecursionlimit(limit)
        warnings.filters[:] = filters
    printed = "".join(out) + sink.buffer.getvalue().decode("utf-8", "replace")
    ends.append([end.ok, end.value, end.kind, end.detail, printed])
ends
"""

_SDK = (
    "class ToolCallError(Exception):\n    pass\n\n"
    "class tools:\n    pass\n\n"
    "def parallel(*thunks):\n    return [t() for t in thunks]\n"
)
"""A minimal SDK module: the corpora call no tools."""

BATCH_BYTES = 120 * 1024
"""Largest batch program (the program limit is 256 KiB)."""
BATCH_LIMITS = Limits(
    wall_seconds=120, cpu_seconds=100, memory_mib=512, result_bytes=8 << 20, output_bytes=1 << 20
)
SINGLE_LIMITS = Limits(wall_seconds=20, cpu_seconds=15, memory_mib=512)


def batch_program(cases: Sequence[Case], profile: str) -> str:
    codes = json.dumps([c.code for c in cases])
    return f"CASES = {codes!r}\nPROFILE = {profile!r}\n{_BATCH}"


def _batches(cases: Sequence[Case], profile: str) -> list[list[Case]]:
    out: list[list[Case]] = [[]]
    size = 0
    for case in cases:
        cost = len(json.dumps(case.code)) * 2
        if out[-1] and size + cost > BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(case)
        size += cost
    return [b for b in out if b]


async def _no_calls(calls: Sequence[CallRequest]) -> list[CallReply]:
    return [CallReply.failure("TOOL_NOT_FOUND", "the corpora call no tools") for _ in calls]


RunFn = Callable[[RunRequest], Awaitable[RunOutcome]]


@dataclass
class Scoreboard:
    """Verdicts of one runner on one corpus, by case id."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    endings: dict[str, Ending] = field(default_factory=dict)

    def count(self, cases: Iterable[Case], *verdicts: Verdict) -> int:
        return sum(self.verdicts[c.id] in verdicts for c in cases)


async def run_ptc(
    backend: WorkerBackend, cases: Sequence[Case], profile: Profile, *, concurrency: int = 2
) -> Scoreboard:
    """Every case under ``profile`` in real children, many per child (see the module
    docstring)."""
    board = Scoreboard()

    async def run(request: RunRequest) -> RunOutcome:
        return await backend.run(request, on_calls=_no_calls)

    async def one_batch(batch: list[Case]) -> None:
        request = RunRequest(
            code=batch_program(batch, profile),
            sdk_module=_SDK,
            profile="python",
            limits=BATCH_LIMITS,
        )
        outcome = await run(request)
        if outcome.ok and isinstance(outcome.value, list) and len(outcome.value) == len(batch):
            for case, (ok, value, kind, detail, printed) in zip(batch, outcome.value, strict=True):
                ending = ending_of_ptc(ok=ok, value=value, kind=kind, detail=detail, stdout=printed)
                board.endings[case.id] = ending
                board.verdicts[case.id] = judge(case, ending)
            return
        for case in batch:  # the batch did not come back: each case on its own
            single = await run(
                RunRequest(code=case.code, sdk_module=_SDK, profile=profile, limits=SINGLE_LIMITS)
            )
            ending = ending_of_ptc(
                ok=single.ok,
                value=single.value,
                kind=single.kind,
                detail=single.detail,
                stdout=single.output.text,
            )
            board.endings[case.id] = ending
            board.verdicts[case.id] = judge(case, ending)

    limiter = anyio.Semaphore(concurrency)

    async def guarded(batch: list[Case]) -> None:
        async with limiter:
            await one_batch(batch)

    async with anyio.create_task_group() as tg:
        for batch in _batches(cases, profile):
            tg.start_soon(guarded, batch)
    return board
