"""Code mode beyond one machine: run each program on a node of a Ray cluster (``ptc[ray]``).

```python
from worker.ray import RayBackend

async with RayBackend(address="auto") as backend, ptc.ToolRuntime(backend=backend) as rt:
    ...
```

Each node gets one long-lived actor owning that node's :class:`worker.SubprocessBackend`,
so containment, limits, the kill and the enforcement report are exactly the local
worker's on that node; ``RunOutcome.stats.node`` and every ``Enforcement.node`` name it
(``"<ray node id>@<node address>"``). A program's tool calls travel back to the host,
whose ``on_calls`` handler (ptc's pipeline) decides them: policy never runs on a node.
Runs go to the node with the most free capacity (see :mod:`worker._ray._nodes`).

What crosses the cluster is JSON text: the run request (program, SDK module, profile,
limits), the call batches and their replies, output, log records and the outcome. Ray
pickles its own call arguments; ours are ``str`` values, so nothing else of ours is pickled
(the actor class itself is imported on the node by its module path: the nodes need the
same ``ptc`` installed).

Failures: a node lost mid-run ends that run as ``worker-exit`` and the next runs go to the
remaining nodes; a node whose containment is below ``Containment(require=...)`` fails the
run closed as ``sandbox-unavailable`` (its local backend decides, as it would locally);
``abort``, cancelling the calling task, and the host's own deadline (``host_grace_seconds``
after the wall clock) each ask the node to kill the program.

Requires anyio's asyncio backend (Ray's object references are asyncio awaitables). This
module is never imported by ``worker`` or ``ptc``: import it yourself.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Mapping
from typing import Any

import anyio
import ray

from ._abc import CallHandler, StdoutListener, WorkerBackend
from ._errors import WorkerError
from ._ray._nodes import NodePool, RayNode
from ._ray._run import NodeLost, RemoteRun
from ._ray._wire import encode_containment
from ._types import DIMENSIONS, Containment, Dimension, Enforcement, RunOutcome, RunRequest

__all__ = ("RayBackend", "RayNode")

_RANK = {"none": 0, "partial": 1, "full": 2}


class RayBackend(WorkerBackend):
    """Runs programs on the nodes of a Ray cluster; see the module docstring.

    ``address``: as ``ray.init`` takes it (``None`` joins the cluster ``ray.init`` finds or
    starts a local one, ``"auto"``, ``"ray://host:port"``); ignored when Ray is already
    initialised in this process, which is then used as it is. ``containment`` applies on
    every node. ``host_grace_seconds``: how long after the wall clock the host waits for a
    node before ending the run as ``timeout`` itself. ``refresh_seconds``: how often the
    node list is re-read. ``start_timeout_seconds``: how long a new node's actor may take
    to start. ``init_options``: more keyword arguments for ``ray.init``.

    ``aclose()`` stops every actor (each reaps its zygote and pool first) and, if this
    backend called ``ray.init``, shuts Ray down.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        containment: Containment | None = None,
        host_grace_seconds: float = 1.0,
        refresh_seconds: float = 10.0,
        start_timeout_seconds: float = 60.0,
        init_options: Mapping[str, Any] | None = None,
    ) -> None:
        for name, value in (
            ("host_grace_seconds", host_grace_seconds),
            ("refresh_seconds", refresh_seconds),
            ("start_timeout_seconds", start_timeout_seconds),
        ):
            if not value > 0 or value == float("inf"):
                raise ValueError(f"RayBackend: {name} must be a positive finite number")
        self.containment = containment or Containment()
        self._address = address
        self._grace = float(host_grace_seconds)
        self._refresh_seconds = float(refresh_seconds)
        self._start_timeout = float(start_timeout_seconds)
        self._init_options = dict(init_options or {})
        self._pool: NodePool | None = None
        self._owns_ray = False
        self._closed = False
        self._start_lock = anyio.Lock()

    @property
    def closed(self) -> bool:
        return self._closed

    async def start(self) -> None:
        """Connect to (or start) Ray and start one actor per node, waiting for them."""
        if self._closed:
            raise WorkerError("backend is closed")
        _require_asyncio()
        async with self._start_lock:
            if self._pool is not None:
                return
            if not ray.is_initialized():
                options = {"address": self._address, **self._init_options}
                try:
                    await anyio.to_thread.run_sync(lambda: ray.init(**options))
                except Exception as exc:  # Ray raises ConnectionError, ValueError, ...
                    where = self._address or "a local cluster"
                    raise WorkerError(f"could not start or join Ray ({where}): {exc}") from exc
                self._owns_ray = True
            pool = NodePool(
                containment_json=encode_containment(self.containment),
                refresh_seconds=self._refresh_seconds,
                start_timeout_seconds=self._start_timeout,
                tag=secrets.token_hex(4),
            )
            await pool.refresh(wait=True)
            self._pool = pool

    async def run(
        self,
        request: RunRequest,
        *,
        on_calls: CallHandler,
        on_stdout: StdoutListener | None = None,
        abort: anyio.Event | None = None,
        started: float | None = None,
    ) -> RunOutcome:
        if started is None:
            started = time.monotonic()
        if self._closed:
            raise WorkerError("backend is closed")
        await self.start()
        pool = self._pool
        assert pool is not None
        node = await pool.pick()
        if node is None:
            detail = "no Ray node with a CPU and a started ptc actor is available"
            if pool.lost_reasons:
                detail += "; lost: " + "; ".join(pool.lost_reasons[-3:])
            return RunOutcome(ok=False, kind="worker-exit", detail=detail)
        run = RemoteRun(
            node,
            request,
            on_calls=on_calls,
            on_stdout=on_stdout,
            abort=abort,
            started=started,
            grace_seconds=self._grace,
        )
        try:
            outcome = await run.drive()
            if run.unresponsive:
                pool.suspect(node)
            return outcome
        except NodeLost as exc:
            pool.lose(node, str(exc))
            detail = (
                f"the Ray node {node.name} running the program was lost mid-run ({exc}); "
                "later runs go to the remaining nodes"
            )
            return run.fail("worker-exit", detail)
        finally:
            node.running -= 1

    def probe(self) -> Mapping[Dimension, Enforcement]:
        """Per dimension, the weakest enforcement any ready node reported (naming it)."""
        if self._pool is None:
            raise WorkerError("RayBackend.probe() needs start() first")
        reports = [n.probe for n in self._pool.ready()]
        if not reports:
            raise WorkerError("no Ray node is ready")
        return {
            dim: min((r[dim] for r in reports), key=lambda e: _RANK[e.level]) for dim in DIMENSIONS
        }

    def nodes(self) -> list[RayNode]:
        """The nodes in use: id, address, name, capacity, runs in flight, pids."""
        if self._pool is None:
            return []
        return [n.public() for n in self._pool.ready()]

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            pool, self._pool = self._pool, None
            if pool is not None:
                await pool.close()
            if self._owns_ray:
                await anyio.to_thread.run_sync(ray.shutdown)


def _require_asyncio() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise WorkerError("RayBackend needs anyio's asyncio backend") from None
