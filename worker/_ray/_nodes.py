"""The host's view of the cluster for ``worker.ray``: one actor per node, their capacity
and load, which node gets the next run, and which nodes were lost.

A node qualifies when Ray reports it alive with at least one CPU (a head node started with
``num_cpus=0`` is left alone, as Ray's own scheduler would). Its actor is pinned to it
(hard node affinity, ``num_cpus=0``: it reserves nothing, the programs it runs are what
use the node). A run goes to the ready node with the lowest ``running / capacity``
(capacity = the node's CPUs), ties to the node that got fewer runs so far. The node list
is re-read every ``refresh_seconds`` and whenever no node is ready, so nodes that join are
used from then on; a node whose actor died is skipped until Ray still lists it as alive
a minute later (a restarted Ray node has a new id anyway). A node that let a
run pass the host's deadline is suspect: it gets no runs until its actor answers a ping.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .._errors import ProtocolError
from .._types import DIMENSIONS, Dimension, Enforcement
from ._node import NodeService
from ._wire import decode_enforcement

ACTOR_ENV = {"RAY_kill_child_processes_on_worker_exit": "0"}
"""The actor's own environment: Ray must not SIGKILL the zygote when the actor dies (a node
lost, the actor killed). The zygote dies with the actor anyway (its death signal), and
first removes what its keepers left behind, which a SIGKILL would not let it do."""
CLOSE_TIMEOUT_S = 10.0
LOST_RETRY_S = 60.0
"""A node whose actor died is tried again after this long if Ray still lists it alive (Ray
takes tens of seconds to declare a silent node dead; an actor placed there meanwhile would
only wait)."""


@dataclass(frozen=True, kw_only=True)
class RayNode:
    """One node as the backend sees it. ``name`` is what stats and enforcement carry."""

    node_id: str
    address: str
    name: str
    capacity: int
    running: int
    actor_pid: int
    zygote_pid: int | None


class Node:
    """Mutable host-side bookkeeping for one node and its actor."""

    def __init__(self, node_id: str, address: str, capacity: int, actor: Any) -> None:
        self.node_id = node_id
        self.address = address
        self.capacity = capacity
        self.actor = actor
        self.name = f"{node_id}@{address}"
        self.started: Any = None  # concurrent.futures.Future of the actor's start()
        self.spawned_at = time.monotonic()
        self.ping: Any = None  # Future of status() while the node is suspect
        self.ready = False
        self.probe: dict[Dimension, Enforcement] = {}
        self.actor_pid = 0
        self.zygote_pid: int | None = None
        self.running = 0
        self.dispatched = 0

    def public(self) -> RayNode:
        return RayNode(
            node_id=self.node_id,
            address=self.address,
            name=self.name,
            capacity=self.capacity,
            running=self.running,
            actor_pid=self.actor_pid,
            zygote_pid=self.zygote_pid,
        )

    def accept(self, info_json: str) -> None:
        """Take the actor's start report; raise ``ProtocolError`` if it is not this node's."""
        info = json.loads(info_json)
        if info.get("node_id") != self.node_id:
            raise ProtocolError(f"actor for node {self.node_id} runs on {info.get('node_id')}")
        self.probe = decode_enforcement(info.get("probe"), self.name)
        if len(self.probe) != len(DIMENSIONS):
            raise ProtocolError(f"actor for node {self.node_id} reported an incomplete probe")
        self.actor_pid = int(info["pid"])
        zygote = info.get("zygote_pid")
        self.zygote_pid = int(zygote) if zygote is not None else None
        self.ready = True


class NodePool:
    """Every node's actor, their load, and the choice of node per run."""

    def __init__(
        self,
        *,
        containment_json: str,
        refresh_seconds: float,
        start_timeout_seconds: float,
        tag: str,
    ) -> None:
        self._containment_json = containment_json
        self._refresh_seconds = refresh_seconds
        self._start_timeout_seconds = start_timeout_seconds
        self._tag = tag
        self._actor_class = ray.remote(NodeService)
        self._nodes: dict[str, Node] = {}
        self._lost: dict[str, float] = {}
        self._last_refresh = float("-inf")
        self._lock = anyio.Lock()
        self.lost_reasons: list[str] = []

    def ready(self) -> list[Node]:
        """Nodes that take runs: started, and not suspect."""
        self._collect()
        return [n for n in self._nodes.values() if n.ready and n.ping is None]

    def suspect(self, node: Node) -> None:
        """``node`` missed a deadline: no runs until it answers a ping (else it is lost)."""
        if node.ping is None and self._nodes.get(node.node_id) is node:
            with contextlib.suppress(Exception):
                node.ping = node.actor.status.remote().future()

    async def refresh(self, *, wait: bool) -> None:
        """Re-read Ray's node list: start actors on new nodes, forget departed ones.

        With ``wait``, wait (up to ``start_timeout_seconds``) for every new actor."""
        async with self._lock:
            listing: list[Mapping[str, Any]] = await anyio.to_thread.run_sync(ray.nodes)
            now = time.monotonic()
            alive = {n["NodeID"]: n for n in listing if n.get("Alive")}
            for node_id in list(self._nodes):
                if node_id not in alive:
                    self._forget(self._nodes[node_id], now)
            for node_id, info in alive.items():
                cpus = float(info.get("Resources", {}).get("CPU", 0))
                lost_at = self._lost.get(node_id)
                recently_lost = lost_at is not None and now - lost_at < LOST_RETRY_S
                if node_id in self._nodes or cpus <= 0 or recently_lost:
                    continue
                address = str(info.get("NodeManagerAddress", ""))
                self._spawn(node_id, address, max(1, int(cpus)))
            self._last_refresh = now
        if wait:
            await self.wait_started(any_ready=False)

    def _starting(self) -> bool:
        return any(n.started is not None for n in self._nodes.values())

    async def wait_started(self, *, any_ready: bool) -> None:
        """Wait until no actor is still starting (or, with ``any_ready``, until some node is
        ready). An actor that takes longer than ``start_timeout_seconds`` is given up."""
        while self._starting() and not (any_ready and self.ready()):
            await anyio.sleep(0.01)
            self._collect()

    async def pick(self) -> Node | None:
        """The node for the next run (its ``running`` already counted), or ``None``."""
        if time.monotonic() - self._last_refresh >= self._refresh_seconds:
            await self.refresh(wait=False)
        ready = self.ready()
        if not ready:
            if not self._starting():
                await self.refresh(wait=False)
            await self.wait_started(any_ready=True)
            ready = self.ready()
        if not ready:
            return None
        node = min(ready, key=lambda n: (n.running / n.capacity, n.dispatched))
        node.running += 1
        node.dispatched += 1
        return node

    def lose(self, node: Node, reason: str) -> None:
        """Stop using ``node`` (its actor died or failed); later runs go elsewhere."""
        self.lost_reasons.append(f"{node.name}: {reason}")
        self._forget(node, time.monotonic())

    def _forget(self, node: Node, now: float) -> None:
        if self._nodes.get(node.node_id) is node:
            del self._nodes[node.node_id]
        self._lost[node.node_id] = now
        with contextlib.suppress(Exception):  # best effort: it may be gone already
            ray.kill(node.actor, no_restart=True)

    def _spawn(self, node_id: str, address: str, capacity: int) -> None:
        # Ray types a handle's methods as the class's own; ``.remote`` is added at run time.
        actor: Any = self._actor_class.options(
            name=f"ptc-node:{self._tag}:{node_id}",
            num_cpus=0,
            max_restarts=0,
            max_task_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            runtime_env={"env_vars": ACTOR_ENV},
        ).remote(self._containment_json)
        node = Node(node_id, address, capacity, actor)
        node.started = actor.start.remote().future()
        self._nodes[node_id] = node

    def _collect(self) -> None:
        """Promote nodes whose actor finished starting; drop those whose start failed;
        take back suspect nodes that answered their ping, drop those whose ping failed."""
        for node in list(self._nodes.values()):
            ping = node.ping
            if ping is not None and ping.done():
                node.ping = None
                if ping.exception() is not None:
                    self.lose(node, f"it stopped answering: {ping.exception()}")
                    continue
            started = node.started
            if started is not None and not started.done():
                if time.monotonic() - node.spawned_at > self._start_timeout_seconds:
                    timeout = self._start_timeout_seconds
                    self.lose(node, f"its actor did not start within {timeout:g} s")
                continue
            if started is None:
                continue
            node.started = None
            try:
                node.accept(started.result())
            except Exception as exc:  # a dead actor, a foreign node: either way, unusable
                self.lose(node, f"its actor failed to start: {type(exc).__name__}: {exc}")

    async def close(self) -> None:
        """Stop every actor: let each reap its zygote and pool, then kill it."""
        nodes, self._nodes = list(self._nodes.values()), {}
        closing = []
        for node in nodes:
            if not node.ready:  # never started: nothing of ours to reap there
                continue
            with contextlib.suppress(Exception):  # a dead actor, or Ray already shut down
                closing.append(node.actor.close.remote())
        with anyio.move_on_after(CLOSE_TIMEOUT_S):
            for ref in closing:
                with contextlib.suppress(Exception):
                    await ref
        for node in nodes:
            with contextlib.suppress(Exception):
                ray.kill(node.actor, no_restart=True)
