"""How a program ends: a JSON value, or a child failure kind with its detail.

:class:`ProgramStop` is how a limit or a policy guard ends a run from inside;
:class:`ProgramResult` is the end as data (it becomes the ``done`` frame);
:func:`check_result` accepts a program's value only as plain JSON within ``result_bytes``.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from types import CoroutineType
from typing import Any

from .._errors import ProtocolError
from .._protocol._framing import (
    MAX_FRAME_BYTES,
    coroutine_name,
    encode,
    json_problem,
    json_size,
    scrub_surrogates,
    scrub_text,
)

MAX_DETAIL_CHARS = 16 * 1024
"""Longest failure detail sent to the host (head and tail kept around a marker)."""


class ProgramStop(BaseException):
    """Ends a run from inside with a given failure kind (a limit, a policy violation).

    A ``BaseException`` so a plain ``except Exception`` in the program does not swallow
    it; whoever raises it also records it, so a program that catches it anyway still
    ends with this kind.
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True, kw_only=True)
class ProgramResult:
    """How a program ended: a JSON value, or a child failure kind with its detail."""

    ok: bool
    value: Any = None
    kind: str = ""
    detail: str = ""

    @classmethod
    def failure(cls, kind: str, detail: str) -> ProgramResult:
        return cls(ok=False, kind=kind, detail=cap_detail(detail))

    def as_frame(self) -> dict[str, Any]:
        if self.ok:
            return {"type": "done", "ok": True, "value": self.value}
        return {"type": "done", "ok": False, "kind": self.kind, "detail": scrub_text(self.detail)}

    def encoded(self) -> bytes:
        """The ``done`` frame, encoded; a value too large for one frame (it travels with
        its non-ASCII characters escaped) becomes an ``invalid-result`` instead."""
        try:
            return encode(self.as_frame())
        except (ProtocolError, ValueError) as exc:
            return ProgramResult.failure(
                "invalid-result",
                f"the result cannot be sent: {exc}; the frame cap is {MAX_FRAME_BYTES} bytes "
                "with non-ASCII characters escaped (\\uXXXX); return a smaller value",
            ).encoded()


def check_result(value: Any, *, result_bytes: int) -> ProgramResult:
    """Accept ``value`` only as a plain JSON value whose encoding fits ``result_bytes``.

    Lone surrogates in its strings become U+FFFD (as in stdout and log records)."""
    if isinstance(value, Coroutine):  # `main()` or an SDK call in async code, never awaited
        name = coroutine_name(value)
        _close_coroutines(value)
        # An `async def` of the program's can also be run from sync code; an SDK call cannot.
        run = (
            f", or `asyncio.run({name}(...))` outside async code"
            if isinstance(value, CoroutineType)
            else ""
        )
        return ProgramResult.failure(
            "invalid-result",
            f"the result must be a JSON value, not the coroutine {name}(...), never awaited: "
            f"write `await {name}(...)`{run}",
        )
    problem = json_problem(value)
    if problem is not None:
        _close_coroutines(value)
        return ProgramResult.failure(
            "invalid-result", f"the result must be a JSON value: {problem}"
        )
    value = scrub_surrogates(value)
    size = json_size(value)
    if size > result_bytes:
        return ProgramResult.failure(
            "invalid-result",
            f"the result is {size} bytes as JSON, over the limit of {result_bytes} bytes "
            "(Limits.result_bytes); return a smaller value or print a summary",
        )
    return ProgramResult(ok=True, value=value)


_CLOSE_AT_MOST = 10_000


def _close_coroutines(value: object) -> None:
    """Close the coroutines a refused result holds (in lists and dicts, the first
    :data:`_CLOSE_AT_MOST` items): the failure says they were never awaited, so they
    do not warn it again when they are dropped."""
    todo, seen = [value], 0
    while todo and seen < _CLOSE_AT_MOST:
        item = todo.pop()
        seen += 1
        if type(item) is list:
            todo.extend(item)
        elif type(item) is dict:
            todo.extend(item.values())
        elif isinstance(item, Coroutine):
            try:
                item.close()
            except Exception:  # noqa: BLE001, S110 - the program's own object
                pass


def cap_detail(text: str) -> str:
    """``text`` cut to :data:`MAX_DETAIL_CHARS`, keeping its head and tail."""
    return cap_text(text, MAX_DETAIL_CHARS)


def cap_text(text: str, max_chars: int) -> str:
    """``text`` cut to about ``max_chars``, keeping its head and tail around a marker."""
    if len(text) <= max_chars:
        return text
    half = max_chars // 2 - 32  # room for the marker
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters omitted] ...\n{text[-half:]}"
