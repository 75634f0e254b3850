"""Paused runs as code mode keeps them: the record of a run suspended on a deferred approval,
the ``SUSPENDED`` result it gives, finding it again by token or by call id, and resuming it.

:class:`Pauses` is code mode's side of the suspension store: it writes the record when a
run pauses (:meth:`Pauses.record`), answers a ``run_code`` call that re-calls a paused call
id with the same ``SUSPENDED`` result without running anything (:meth:`Pauses.check`: an
agent framework that re-runs its tool on resume), and finds or takes a paused run by call
id or token (for ``scope.suspension``, ``scope.discard_suspension`` and ``scope.resume``).

Resuming (:meth:`Pauses.resume`) calls ``run_code`` again with the paused call's id and
program; the :class:`~ptc._code._replay.Replay` that answers its earlier calls reaches the body
through a context variable, set around that call and consumed by it
(:meth:`Pauses.replay_for`).
"""

from __future__ import annotations

import contextvars

from .._calls._body import BodyFailure
from .._calls._decisions import ApprovalAnswer
from .._calls._events import logger
from .._calls._tools import RUN_CODE, ToolContext, ToolExecution
from .._errors import ClosedError, SessionError, SuspensionError, UsageError
from .._json import JSON, FrozenDict, thaw
from .._results import ToolResult, error_result
from .._scopes._scope import Scope
from .._scopes._session_view import Session
from .._suspend._suspensions import Suspension, SuspensionStore, new_token
from ._replay import Replay, RunSuspended

__all__ = ("Pauses", "suspended_failure")

_RESUME_ANSWERS: tuple[ApprovalAnswer, ...] = ("allowed-once", "rejected", "cancelled")
# The replay a resumed run_code body picks up: set around the resumed call, consumed by it.
_REPLAY: contextvars.ContextVar[tuple[str, Replay] | None] = contextvars.ContextVar(
    "ptc_replay", default=None
)


class Pauses:
    """The paused runs of one runtime, in its suspension store."""

    def __init__(self, store: SuspensionStore) -> None:
        self.store = store
        self._closed = False

    def close(self) -> None:
        """The runtime closed: nothing resumes any more (the records stay in the store)."""
        self._closed = True

    async def record(
        self,
        scope_path: str,
        execution: ToolExecution,
        code: str,
        description: str | None,
        suspended: RunSuspended,
        resumes: int,
        *,
        session: tuple[str, int] | None = None,
    ) -> BodyFailure:
        """Keep the record of a run that just paused; its ``SUSPENDED`` result."""
        now = self.store.clock()
        token = new_token()
        expires_at = now + self.store.ttl_seconds
        pending = suspended.pending
        meta = dict(suspended.meta)
        meta["suspension"] = {
            "token": token,
            "expires_at": expires_at,
            "pending": {
                "sub_call_id": pending.sub_call_id,
                "name": pending.name,
                "arguments": pending.arguments,
                "reason": pending.reason,
            },
        }
        suspension = Suspension(
            token=token,
            scope_path=scope_path,
            call_id=execution.call_id,
            root_call_id=execution.root_call_id,
            code=code,
            description=description,
            created_at=now,
            expires_at=expires_at,
            calls=suspended.calls,
            pending=pending,
            output=suspended.output,
            meta=thaw(meta),
            resumes=resumes,
            session=None if session is None else {"id": session[0], "version": session[1]},
        )
        await self.store.save(suspension)
        return suspended_failure(suspension)

    def check(self, arguments: FrozenDict, context: ToolContext) -> None:
        """Raise the same ``SUSPENDED`` result when this ``run_code`` call's id paused this
        program in this scope (nothing runs: no worker, no tool, no approver). A resumed
        call (its replay set) runs."""
        scope = context.execution.scope
        if _REPLAY.get() is not None or not isinstance(scope, Scope):
            return
        call_id = context.execution.call_id
        try:
            found = self.store.find(scope.path, call_id)
        except SuspensionError:
            logger.exception("run_code %s: its suspension record is unreadable; runs", call_id)
            return
        if found is not None and found.code == arguments.get("code"):
            raise suspended_failure(found)

    def find(self, scope_path: str, call_id: str) -> Suspension | None:
        """The live suspension of the ``run_code`` call ``call_id`` in the scope."""
        return self.store.find(scope_path, call_id)

    async def take(self, scope_path: str, key: str) -> Suspension:
        """Remove and return the paused run named by ``key``: a call id, else a token."""
        found = self.store.find(scope_path, key)
        return await self.store.take(found.token if found else key, scope_path)

    async def resume(self, scope: Scope, token: str, answer: ApprovalAnswer) -> ToolResult:
        """Run a suspended program again in a fresh worker (see ``Scope.resume``)."""
        if answer not in _RESUME_ANSWERS:
            raise UsageError(f"answer must be one of {_RESUME_ANSWERS}, got {answer!r}")
        if self._closed:
            raise ClosedError("the runtime is closed")
        suspension = await self.take(scope.path, token)  # a call id names it too
        paused_on = _paused_on(suspension)
        replay = Replay(
            calls=suspension.calls,
            pending=suspension.pending,
            answer=answer,
            resumes=suspension.resumes + 1,
            session_version=paused_on[1] if paused_on is not None else None,
        )
        arguments: dict[str, JSON] = {"code": suspension.code}
        if suspension.description:
            arguments["description"] = suspension.description
        target: Scope | Session = scope
        if paused_on is not None:  # it resumes on its session
            try:
                target = scope.session(paused_on[0])
            except SessionError as exc:
                return error_result(suspension.call_id, RUN_CODE, "SESSION_EXPIRED", str(exc))
        reset = _REPLAY.set((suspension.code, replay))
        try:
            return await target.call(RUN_CODE, arguments, call_id=suspension.call_id)
        finally:
            _REPLAY.reset(reset)

    @staticmethod
    def replay_for(code: str) -> Replay | None:
        """The replay of the resume this ``run_code`` body runs for, if ``code`` is the
        program it was made for; consumed: a nested ``run_code`` elsewhere starts afresh."""
        replay = _REPLAY.get()
        _REPLAY.set(None)
        return replay[1] if replay is not None and replay[0] == code else None


def _paused_on(suspension: Suspension) -> tuple[str, int] | None:
    """The session id and version a run paused on (``None``: it ran on no session)."""
    found = suspension.session
    if isinstance(found, dict):
        session_id, version = found.get("id"), found.get("version")
        if isinstance(session_id, str) and isinstance(version, int):
            return session_id, version
    return None


def suspended_failure(suspension: Suspension) -> BodyFailure:
    """The ``SUSPENDED`` result of a paused run, from its record."""
    pending = suspension.pending
    why = f" ({pending.reason})" if pending.reason else ""
    message = (
        f"code run suspended: `{pending.name}` awaits a person's approval{why}. The program "
        "was stopped before that call; when the approval is decided the host resumes it, "
        "and the calls already made are not made again. Do not call run_code again for "
        f"this task now.\nCaptured output:\n{suspension.output}"
    )
    meta = suspension.meta if isinstance(suspension.meta, dict) else {}
    if suspension.session is not None:
        message += (
            "\n[session] Nothing of this run is saved while it is paused; when it resumes, "
            "its state is saved if the session has not moved on meanwhile."
        )
    return BodyFailure("SUSPENDED", message, meta)
