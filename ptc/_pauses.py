"""Paused runs as code mode keeps them: the record of a run suspended on a deferred approval,
the ``SUSPENDED`` result it gives, and finding it again by token or by call id.

:class:`Pauses` is code mode's side of the suspension store: it writes the record when a
run pauses (:meth:`Pauses.record`), answers a ``run_code`` call that re-calls a paused call
id with the same ``SUSPENDED`` result without running anything (:meth:`Pauses.check`: an
agent framework that re-runs its tool on resume), and finds or takes a paused run by call
id or token (for ``scope.suspension``, ``scope.discard_suspension`` and ``scope.resume``).
"""

from __future__ import annotations

import time

from ._body import BodyFailure
from ._errors import SuspensionError
from ._events import logger
from ._json import FrozenDict, thaw
from ._replay import RunSuspended
from ._suspensions import Suspension, SuspensionStore, new_token
from ._tools import ToolExecution

__all__ = ("Pauses", "suspended_failure")


class Pauses:
    """The paused runs of one runtime, in its suspension store."""

    def __init__(self, store: SuspensionStore) -> None:
        self.store = store

    async def record(
        self,
        scope_path: str,
        execution: ToolExecution,
        code: str,
        description: str | None,
        suspended: RunSuspended,
        resumes: int,
    ) -> BodyFailure:
        """Keep the record of a run that just paused; its ``SUSPENDED`` result."""
        now = time.time()
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
        )
        await self.store.save(suspension)
        return suspended_failure(suspension)

    def check(self, scope_path: str, call_id: str, arguments: FrozenDict) -> None:
        """Raise the same ``SUSPENDED`` result when ``call_id`` paused this program in this
        scope (nothing runs: no worker, no tool, no approver)."""
        try:
            found = self.store.find(scope_path, call_id)
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
    return BodyFailure("SUSPENDED", message, meta)
