"""Policy violations of a restricted program, recorded per run.

:class:`PolicyViolation` is what every guard raises; it records itself with the run being
recorded (:func:`recording_violations`, a context variable ``run_program`` sets), so the
run ends as ``policy`` even when the program catches it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ._outcome import ProgramStop

_record: ContextVar[list[PolicyViolation] | None] = ContextVar("ptc_violations", default=None)


class PolicyViolation(ProgramStop):
    """A restricted program tried something the policy forbids.

    Created only by a guard; it records itself with the run being recorded (if any), so
    the run ends as ``policy`` even when the program catches it."""

    def __init__(self, detail: str) -> None:
        super().__init__("policy", detail)
        record = _record.get()
        if record is not None:
            record.append(self)


@contextmanager
def recording_violations() -> Iterator[list[PolicyViolation]]:
    """Collect every :class:`PolicyViolation` raised in this context (one program run)."""
    record: list[PolicyViolation] = []
    token = _record.set(record)
    try:
        yield record
    finally:
        _record.reset(token)
