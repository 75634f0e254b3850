"""The worker package's exceptions: one root, a small tree.

```
WorkerError                 root of everything ``worker`` raises
 ├── ProtocolError          a frame broke the wire protocol (framing, JSON, schema, order)
 └── StartFailed            a child could not start; ``lasting`` when retrying cannot help
```

Limit breaches, policy violations and program failures are never raised to the host: they
come back as a :class:`worker.RunOutcome` with a failure kind. Only host bugs and protocol
violations raise.
"""

from __future__ import annotations


class WorkerError(Exception):
    """Root of every exception the ``worker`` package raises."""


class ProtocolError(WorkerError):
    """A frame violated the wire protocol. ``detail`` names the problem."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class StartFailed(WorkerError):
    """A child could not start, for the reason in the message. ``lasting`` when the cause
    stays on this host (a permission refused, a kernel feature missing): asking again
    would fail the same way, so the pool stops asking for a while."""

    def __init__(self, message: str, *, lasting: bool) -> None:
        super().__init__(message)
        self.lasting = lasting
