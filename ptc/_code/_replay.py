"""What a run keeps of its nested calls for a suspension, and how a resumed run replays them.

**Suspension.** When the approver defers a call, the run stops admitting calls, kills the
worker at once, lets calls already started finish, and ends with :class:`RunSuspended`:
every completed call (name, arguments, the reply the program got) and the pending one.
**Replay.** A resumed run is handed that record as a :class:`Replay`: its program's calls
are compared, position by position, with the record; recorded ones are answered from it
(no tool, no policy: the dispatch log marks them ``replayed``), the pending one runs
through the pipeline with the person's answer in place of the approver, later ones run
live, and any difference ends the run as ``replay-diverged``.

:class:`CallRecord` is one run's side of both: it numbers nothing and dispatches nothing
(``_run`` does), it only remembers and compares.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from worker import CallReply

from .._calls._decisions import ApprovalAnswer, ApprovalRequest, Approver
from .._calls._scheduler import ToolCall
from .._json import JSON, thaw
from .._results import ToolResult
from .._suspend._suspensions import PendingApproval, RecordedCall

__all__ = ("CallRecord", "Replay", "RunSuspended")


@dataclass(frozen=True, kw_only=True)
class Replay:
    """What a resumed run replays: the recorded calls, the pending one and its answer."""

    calls: tuple[RecordedCall, ...]
    pending: PendingApproval
    answer: ApprovalAnswer
    resumes: int = 1
    """How many times the program has been resumed, this time included."""
    session_version: int | None = None
    """The version of its session the run paused from (a run on a session): it commits
    only if the session is still there."""


class RunSuspended(Exception):  # noqa: N818 - an outcome, named for what it carries
    """A run ended because a call's approval was deferred (see the module docstring)."""

    def __init__(
        self,
        calls: tuple[RecordedCall, ...],
        pending: PendingApproval,
        output: str,
        meta: dict[str, JSON],
    ) -> None:
        super().__init__(pending.name)
        self.calls = calls
        self.pending = pending
        self.output = output
        self.meta = meta


class CallRecord:
    """One run's completed calls, its pending one, and (resumed) how its calls compare
    with the record it replays. ``diverged`` says why they differ ("" while they agree);
    ``on_diverged`` is told once, when they first do. ``may_suspend``: whether a call of
    the run can be deferred at all (its runtime has an approver); if not, completed calls
    are not kept."""

    def __init__(
        self,
        call_id: str,
        replay: Replay | None,
        on_diverged: Callable[[str], None],
        *,
        may_suspend: bool = True,
    ) -> None:
        self.replay = replay
        # Without an approver no call can be deferred, so no record is ever asked for: a
        # run of 100,000 calls then keeps none (a resumed run always keeps its own).
        self._keeps = may_suspend or replay is not None
        self.pending: PendingApproval | None = None
        self.diverged = ""
        self._call_id = call_id
        self._on_diverged = on_diverged
        self._recorded = {c.n: c for c in replay.calls} if replay is not None else {}
        # Each completed call as JSON text: a run may complete 100,000 calls, and text is
        # one object the garbage collector never scans (a record of objects is a dozen).
        self._completed: dict[int, str | RecordedCall] = {}
        self._reached_pending = False

    def replayed(self, n: int, call: ToolCall) -> RecordedCall | None:
        """The recorded answer of call ``n``, ``None`` to run it live; a call that differs
        from the record ends the run as ``replay-diverged``."""
        replay = self.replay
        if replay is None or self.diverged:
            return None
        expected: tuple[str, JSON] | None = None
        recorded = self._recorded.get(n)
        if recorded is not None:
            expected = (recorded.name, recorded.arguments)
        elif n == replay.pending.n:
            expected = (replay.pending.name, replay.pending.arguments)
            self._reached_pending = True
        if expected is not None and (call.name, thaw(dict(call.arguments))) != expected:
            self.diverged = (
                f"call {n} of the resumed run is {_show(call.name, call.arguments)}, but the "
                f"suspended run made {_show(*expected)} there; a resumed program must make "
                "the same calls in the same order (no clocks, randomness or other inputs that "
                "change between runs may choose them)"
            )
            self._on_diverged(self.diverged)
        return recorded

    def answer_replayed(self, n: int, recorded: RecordedCall) -> CallReply:
        """The reply call ``n`` gets from the record (it counts as completed again)."""
        if self._keeps:
            self._completed[n] = _pack(recorded)
        if recorded.ok:
            return CallReply.success(recorded.value)
        return CallReply.failure(recorded.code, recorded.message)

    def completed(self, n: int, call: ToolCall, reply: CallReply, logged: dict[str, JSON]) -> None:
        """Call ``n`` ran live; ``logged`` is its dispatch-log record, whose copies of the
        arguments and content serve this record too."""
        if not self._keeps:
            return
        self._completed[n] = _pack(
            RecordedCall(
                n=n,
                name=call.name,
                arguments=logged["arguments"],
                ok=reply.ok,
                value=reply.value if reply.ok else None,
                code=reply.code,
                message=reply.message,
                content=logged["content"],
            )
        )

    def suspend(self, n: int, call: ToolCall, result: ToolResult) -> None:
        """Call ``n``'s approval was deferred: the first such call is the pending one."""
        if self.pending is not None:
            return
        info = result.meta.get("info")
        reason = info.get("reason") if isinstance(info, dict) else None
        display = info.get("display_reason") if isinstance(info, dict) else None
        self.pending = PendingApproval(
            n=n,
            sub_call_id=call.call_id or "",
            name=call.name,
            arguments=thaw(dict(call.arguments)),
            reason=reason if isinstance(reason, str) else None,
            display_reason=display if isinstance(display, str) else None,
        )

    def approver(self, call: ToolCall) -> Approver | None:
        """For the replayed pending call, the person's answer in the approver's place: the
        call runs through the pipeline again, and its Ask was answered already."""
        replay = self.replay
        if replay is None or call.call_id != f"{self._call_id}:ptc:{replay.pending.n}":
            return None
        answer = replay.answer

        async def decided(request: ApprovalRequest) -> ApprovalAnswer:
            return answer

        return decided

    def suspension(self, output: str, meta: dict[str, JSON]) -> RunSuspended | None:
        """How the run ends when a call was deferred (``None`` when none was)."""
        if self.pending is None:
            return None
        calls = tuple(_unpack(n, self._completed[n]) for n in sorted(self._completed))
        return RunSuspended(calls, self.pending, output, meta)

    def missed_pending(self) -> str:
        """Why a resumed program that ended normally still diverged: it never made the call
        that awaited approval ("" when it did, or the run was not resumed)."""
        if self.replay is None or self._reached_pending:
            return ""
        return (
            f"the resumed program ended without making call {self.replay.pending.n} "
            f"({self.replay.pending.name}), the one that awaited approval; a resumed "
            "program must make the same calls in the same order"
        )


def _pack(call: RecordedCall) -> str | RecordedCall:
    """A recorded call as JSON text (its plain-JSON fields, without ``n``); as it is when
    Python will not write it (an integer of more than 4300 digits)."""
    fields = [call.name, call.arguments, call.ok, call.value, call.code, call.message]
    try:
        return json.dumps([*fields, call.content], separators=(",", ":"))
    except ValueError:
        return call


def _unpack(n: int, packed: str | RecordedCall) -> RecordedCall:
    if isinstance(packed, RecordedCall):
        return packed
    name, arguments, ok, value, code, message, content = json.loads(packed)
    return RecordedCall(
        n=n,
        name=name,
        arguments=arguments,
        ok=ok,
        value=value,
        code=code,
        message=message,
        content=content,
    )


def _show(name: str, arguments: object) -> str:
    text = json.dumps(arguments, sort_keys=True, default=str)
    if len(text) > 200:
        text = text[:197] + "..."
    return f"{name}({text})"
