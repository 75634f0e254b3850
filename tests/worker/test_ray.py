"""RayBackend on a real two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``).

Runs only inside a network namespace of its own, where Ray binds 127.0.0.1 and nothing
else: ``make test`` runs this module as ``unshare -n sh -c 'ip link set lo up && pytest
...'`` after the main run (which ignores it). One cluster serves the module; the tests run
in file order and the later ones change it (a node is killed, another joins, the backend
closes).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

if [name for _, name in socket.if_nameindex()] != ["lo"]:
    WHY = (
        "Ray must not bind this machine's external interface: this module runs inside its "
        "own network namespace (`make pytest-ray`, part of `make test`)"
    )
    if os.environ.get("PTC_RAY_NETNS") == "1":  # the Makefile promised a namespace: fail
        raise RuntimeError(f"not in a network namespace of its own: {WHY}")
    pytest.skip(WHY, allow_module_level=True)

import ray
from ray.cluster_utils import Cluster

import ptc
from ptc._calls._decisions import ApprovalAnswer
from tests._typing import data
from tests.security._support import (
    SDK,
    cgroup_bases,
    descendants,
    echo_calls,
    run_cgroups,
    scratch_dirs,
)
from worker import (
    DIMENSIONS,
    CallReply,
    CallRequest,
    Containment,
    Limits,
    RunOutcome,
    RunRequest,
    SubprocessBackend,
    WorkerBackend,
    WorkerError,
)
from worker.ray import RayBackend, RayNode

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root]

LONG = Limits(wall_seconds=20.0, cpu_seconds=10.0, memory_mib=256)


@dataclass
class Env:
    cluster: Cluster
    head_id: str
    worker: Any  # the non-head node (ray._private.node.Node), which can be removed
    scratch_root: str
    """The nodes' temp dir, made for this module: their runs' scratch dirs, and only
    theirs, are there (other ptc hosts on this machine use their own)."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    # The cluster's processes inherit this environment: their tempfile.gettempdir() is the
    # private root (Ray itself keeps its session where it was).
    scratch_root = tempfile.mkdtemp(prefix="ptc-ray-test-")
    os.chmod(scratch_root, 0o755)
    saved = {name: os.environ.get(name) for name in ("TMPDIR", "RAY_TMPDIR")}
    os.environ.setdefault("RAY_TMPDIR", tempfile.gettempdir())
    os.environ["TMPDIR"] = scratch_root
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        worker = cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, log_to_driver=False)
        head: Any = cluster.head_node  # typed as None by Ray (set in __init__)
        try:
            yield Env(cluster, head.node_id, worker, scratch_root)
        finally:
            ray.shutdown()
            cluster.shutdown()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    # Every node's pool, closed or lost (killed, frozen and dropped, shut down with the
    # cluster), leaves no scratch dir behind once its zygote is gone. Nothing here says
    # when the last zygote exits: polled, with a generous bound.
    deadline = time.monotonic() + 20
    while scratch_dirs(scratch_root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scratch_dirs(scratch_root) == set()
    os.rmdir(scratch_root)


@pytest.fixture(scope="module")
async def backend(env: Env) -> AsyncIterator[RayBackend]:
    async with RayBackend(refresh_seconds=0.5) as b:
        yield b


def alive_node_ids() -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}


def node_id(outcome: RunOutcome) -> str:
    return outcome.stats.node.partition("@")[0]


async def run(
    backend: WorkerBackend,
    code: str,
    limits: Limits = LONG,
    *,
    on_stdout: Any = None,
    abort: anyio.Event | None = None,
) -> RunOutcome:
    request = RunRequest(code=code, sdk_module=SDK, limits=limits)
    return await backend.run(request, on_calls=echo_calls, on_stdout=on_stdout, abort=abort)


def marked_program(marker: str, seconds: int = 30) -> str:
    """A program that holds a file named ``marker`` open (findable in /proc), says
    ``started`` and sleeps."""
    return (
        f"import time\nf = open({marker!r}, 'w')\nprint('started', flush=True)\n"
        f"time.sleep({seconds})"
    )


def holders(marker: str, nodes: Sequence[RayNode]) -> list[int]:
    """Pids under the nodes' zygotes that have the file ``marker`` open."""
    found = []
    for node in nodes:
        for pid in descendants(node.zygote_pid or 0):
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}").endswith(marker):
                        found.append(pid)
                except OSError:
                    continue
    return found


async def wait_until(predicate: Any, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.02)
    return True


def node_scratch_dirs(node: RayNode, env: Env) -> set[str]:
    """The node backend's scratch root and its children's own dirs in it (found from each
    child's working directory: ``<root>/scratch``, a tmpfs, or ``<root>/run-<n>``)."""
    found = set()
    for pid in descendants(node.zygote_pid or 0):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        root, leaf = os.path.split(cwd)
        found.add(os.path.basename(root))
        if leaf != "scratch":
            found.add(f"{os.path.basename(root)}/{leaf}")
    return found & scratch_dirs(env.scratch_root)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# -- placement and the report ------------------------------------------------------------


async def test_runs_land_on_both_nodes_and_name_them(env: Env, backend: RayBackend) -> None:
    assert {n.node_id for n in backend.nodes()} == alive_node_ids()
    probe = backend.probe()  # the weakest level per dimension over the nodes: full here
    assert {d: e.level for d, e in probe.items()} == dict.fromkeys(DIMENSIONS, "full")
    assert {e.node for e in probe.values()} <= {n.name for n in backend.nodes()}
    outcomes: list[RunOutcome] = []

    async def one() -> None:
        outcomes.append(await run(backend, "import time\ntime.sleep(0.3)\nreturn 7"))

    async with anyio.create_task_group() as tg:  # one run per node: each has one CPU
        tg.start_soon(one)
        tg.start_soon(one)
    assert [o.value for o in outcomes] == [7, 7]
    assert {node_id(o) for o in outcomes} == alive_node_ids()
    for outcome in outcomes:
        assert set(outcome.enforcement) == set(DIMENSIONS)
        for report in outcome.enforcement.values():
            assert report.level == "full", outcome.enforcement_json()
            assert report.node == outcome.stats.node
        assert outcome.stats.as_json()["node"] == outcome.stats.node
        peak = outcome.stats.peak_memory_kib
        assert outcome.stats.cpu_ms > 0 and peak is not None and peak > 0


async def test_sequential_runs_spread_and_output_streams_back(backend: RayBackend) -> None:
    streamed: list[str] = []
    request = RunRequest(code="print('a')\nprint('b')\nreturn tools.echo(x=1)", sdk_module=SDK)
    outcomes = [
        await backend.run(request, on_calls=echo_calls, on_stdout=streamed.append) for _ in range(4)
    ]
    assert [o.value for o in outcomes] == [{"x": 1}] * 4
    assert {node_id(o) for o in outcomes} == alive_node_ids()
    assert "".join(streamed) == "a\nb\n" * 4
    assert all(o.output.text == "a\nb\n" and o.stats.calls == 1 for o in outcomes)


async def test_worker_logs_reach_the_host_under_ptc_worker(
    backend: RayBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ptc.worker")
    await run(backend, "import logging\nlogging.getLogger('prog').warning('careful %d', 3)")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("ptc.worker.prog", "careful 3")]


async def test_batches_are_answered_by_the_host_in_order(backend: RayBackend) -> None:
    batches: list[list[int]] = []

    async def handler(calls: Sequence[CallRequest]) -> list[CallReply]:
        batches.append([c.id for c in calls])
        return await echo_calls(calls)

    code = (
        "x = tools.echo.map([{'i': 1}, {'i': 2}])\n"
        "try:\n    tools.fail()\nexcept ToolCallError as e:\n    x.append(e.code)\n"
        "return x"
    )
    out = await backend.run(RunRequest(code=code, sdk_module=SDK), on_calls=handler)
    assert out.value == [{"i": 1}, {"i": 2}, "TOOL_FAILED"]
    assert batches == [[1, 2], [3]]


# -- policy on the host, end to end ------------------------------------------------------

HOST_PID = os.getpid()
BODIES: list[int] = []
ASKED: list[tuple[int, str]] = []
APPROVALS: dict[str, ApprovalAnswer] = {"yes please": "allowed-once", "no thanks": "rejected"}


async def approver(request: ptc.ApprovalRequest) -> ApprovalAnswer:
    ASKED.append((os.getpid(), str(request.execution.arguments.get("text"))))
    return APPROVALS.get(str(request.execution.arguments.get("text")), "unavailable")


@pytest.fixture(scope="module")
async def rt(backend: RayBackend) -> AsyncIterator[ptc.ToolRuntime]:
    async with ptc.ToolRuntime(backend=backend, approver=approver) as runtime:

        @runtime.tool(concurrency_safe=True)
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            BODIES.append(os.getpid())
            return a + b

        @runtime.tool
        def shout(text: str) -> str:
            """Upper-case a text."""
            BODIES.append(os.getpid())
            return text.upper()

        @runtime.tool
        def delete_everything(confirm: bool) -> str:
            """A dangerous tool."""
            BODIES.append(os.getpid())
            return "deleted"

        yield runtime


async def test_nested_calls_are_decided_by_the_host_pipeline(rt: ptc.ToolRuntime) -> None:
    scope = rt.scope("ray-policy")
    scope.present_as("code")
    scope.guard(lambda ex: "never here" if ex.name == "delete_everything" else None)

    async def policy(ex: ptc.ToolExecution, nxt: Any) -> Any:
        if ex.name == "add" and ex.arguments.get("a") == 13:
            return ptc.Deny("unlucky")
        if ex.name == "shout":
            return ptc.Ask("shouting needs approval")
        return await nxt()

    scope.on("tools/pre-execute", policy)
    BODIES.clear()
    ASKED.clear()
    code = (
        "out = [tools.add(a=1, b=2)]\n"
        "for call in (lambda: tools.add(a=13, b=0),\n"
        "             lambda: tools.delete_everything(confirm=True),\n"
        "             lambda: tools.shout(text='yes please'),\n"
        "             lambda: tools.shout(text='no thanks')):\n"
        "    try:\n        out.append(call())\n"
        "    except ToolCallError as e:\n        out.append([e.tool, e.code, e.message])\n"
        "return out"
    )
    result = await scope.run_code(code, call_id="rp")
    assert not result.is_error, result.error
    value: Any = result.value
    meta: Any = result.meta
    assert value["result"] == [
        3,
        ["add", "DENIED", "unlucky"],
        ["delete_everything", "DENIED", "never here"],
        "YES PLEASE",
        ["shout", "ASK_REJECTED", value["result"][4][2]],
    ]
    # Every decision and every body ran in this (host) process, none on a node.
    assert BODIES == [HOST_PID, HOST_PID]
    assert ASKED == [(HOST_PID, "yes please"), (HOST_PID, "no thanks")]
    log = meta["dispatch_log"]
    assert [e["sub_call_id"] for e in log] == [f"rp:ptc:{i}" for i in range(1, 6)]
    assert [e["error_code"] for e in log] == [None, "DENIED", "DENIED", None, "ASK_REJECTED"]
    node = meta["stats"]["node"]
    assert node.partition("@")[0] in alive_node_ids()
    assert {r["node"] for r in meta["enforcement"].values()} == {node}


async def test_a_host_error_in_nested_dispatch_ends_the_run_with_that_error(
    rt: ptc.ToolRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As with the local backends (tests/ptc/test_codemode.py): the handler's error is the
    # run's, not "0 replies" (worker/_abc.py: a host bug propagates from run()).
    from ptc._code._dispatch_log import DispatchLog

    async def broken(*args: object) -> None:
        raise RuntimeError("host bug in the dispatch log")

    monkeypatch.setattr(DispatchLog, "live", broken)
    scope = rt.scope("host-error")
    scope.present_as("code")
    result = await scope.run_code("return tools.add(a=1, b=2)")
    assert result.error is not None and result.error.code == "TOOL_ERROR"
    assert "host bug in the dispatch log" in result.error.message


async def test_a_deferred_approval_suspends_and_the_resumed_run_replays_on_the_cluster(
    backend: RayBackend,
) -> None:
    ran: list[str] = []

    async def defer(request: ptc.ApprovalRequest) -> ApprovalAnswer:
        return "deferred"

    async with ptc.ToolRuntime(backend=backend, approver=defer, default_mode="code") as rt:

        @rt.tool
        def read(n: int) -> int:
            """Read."""
            ran.append("read")
            return n + 1

        @rt.tool
        def write(n: int) -> str:
            """Write (asks first)."""
            ran.append("write")
            return f"wrote {n}"

        async def ask_before_writes(ex: ptc.ToolExecution, nxt: Any) -> Any:
            return ptc.Ask("write?") if ex.name == "write" else await nxt()

        rt.on("tools/pre-execute", ask_before_writes)
        program = "a = tools.read(n=4)\nreturn tools.write(n=a)"
        suspended = await rt.root.run_code(program)
        assert suspended.error is not None and suspended.error.code == "SUSPENDED"
        meta: Any = suspended.meta
        assert meta["stats"]["node"] and ran == ["read"]
        resumed = await rt.root.resume(meta["suspension"]["token"], "allowed-once")
    assert not resumed.is_error, resumed.content
    value: Any = resumed.value
    assert value["result"] == "wrote 5" and ran == ["read", "write"]  # read replayed, not rerun
    resumed_meta: Any = resumed.meta
    assert resumed_meta["stats"]["node"].partition("@")[0] in alive_node_ids()


async def test_a_session_carries_its_state_by_value_across_the_cluster(
    rt: ptc.ToolRuntime,
) -> None:
    scope = rt.scope("ray-session")
    scope.present_as("code")
    session = scope.session()
    await session.run_code("total = tools.add(a=1, b=2)\ndef twice(x):\n    return 2 * x")
    for _ in range(3):  # each run may land on any node: the state travels with it
        step = await session.run_code("total = twice(total)\nreturn total")
        assert not step.is_error, step.text
    assert data(step.value)["result"] == 24
    assert data(step.meta)["session"]["version"] == 4


async def test_a_failed_run_through_the_runtime_names_kind_and_keeps_output(
    rt: ptc.ToolRuntime,
) -> None:
    scope = rt.scope("ray-failure")
    scope.present_as("code", limits=ptc.Limits(wall_seconds=1))
    result = await scope.run_code("print('t', flush=True)\nwhile True:\n    pass")
    assert result.error is not None and result.error.code == "CODE_RUN_FAILED"
    assert result.error.message.startswith("code run failed (timeout): wall clock limit of 1 s")
    assert result.error.message.endswith("Captured output:\nt\n")


# -- limits and kill ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "limits", "kind", "detail"),
    [
        (
            "import time\ntime.sleep(30)",
            Limits(wall_seconds=1),
            "timeout",
            "wall clock limit of 1 s exceeded",
        ),
        (
            "x = bytearray(256 * 1024 * 1024)\nfor i in range(0, len(x), 4096):\n    x[i] = 1",
            Limits(memory_mib=64),
            "memory-limit",
            "64 MiB",
        ),
    ],
)
async def test_limits_are_enforced_on_the_node(
    backend: RayBackend, code: str, limits: Limits, kind: str, detail: str
) -> None:
    out = await run(backend, code, limits)
    assert (out.kind, out.ok) == (kind, False), out
    assert detail in out.detail
    # The node's own backend ended it (it reports the child's rusage), not the host's deadline.
    assert out.stats.cpu_ms > 0 and out.stats.node
    assert "did not end the run" not in out.detail


async def test_abort_kills_the_program_on_its_node(backend: RayBackend) -> None:
    marker = f"m-{uuid.uuid4().hex}"
    abort = anyio.Event()
    seen: list[list[int]] = []

    def on_stdout(text: str) -> None:
        seen.append(holders(marker, backend.nodes()))
        abort.set()

    out = await run(backend, marked_program(marker), on_stdout=on_stdout, abort=abort)
    assert out.kind == "abort" and out.output.text == "started\n"
    assert len(seen[0]) == 1  # the program was running under that node's zygote ...
    assert await wait_until(lambda: not holders(marker, backend.nodes()))  # ... and is gone


async def test_cancelling_the_caller_kills_the_program_on_its_node(backend: RayBackend) -> None:
    marker = f"m-{uuid.uuid4().hex}"
    started = anyio.Event()
    with anyio.move_on_after(20) as scope:
        async with anyio.create_task_group() as tg:

            async def go() -> None:
                await run(backend, marked_program(marker), on_stdout=lambda _: started.set())

            tg.start_soon(go)
            await started.wait()
            assert await wait_until(lambda: len(holders(marker, backend.nodes())) == 1)
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
    assert await wait_until(lambda: not holders(marker, backend.nodes()))
    assert (await run(backend, "return 'next'")).value == "next"


async def test_a_handler_exception_propagates_and_kills_the_program_on_its_node(
    backend: RayBackend,
) -> None:
    marker = f"m-{uuid.uuid4().hex}"

    async def broken(calls: Sequence[CallRequest]) -> list[CallReply]:
        assert len(holders(marker, backend.nodes())) == 1  # the program waits for this reply
        raise RuntimeError("host bug")

    code = f"f = open({marker!r}, 'w')\ntools.echo()\nimport time\ntime.sleep(30)"
    with pytest.raises(RuntimeError, match="host bug"):
        await backend.run(RunRequest(code=code, sdk_module=SDK, limits=LONG), on_calls=broken)
    assert await wait_until(lambda: not holders(marker, backend.nodes()))


async def test_the_host_deadline_ends_a_run_whose_node_stopped_answering(
    backend: RayBackend,
) -> None:
    marker = f"m-{uuid.uuid4().hex}"
    stopped: list[RayNode] = []

    def on_stdout(text: str) -> None:
        node = next(n for n in backend.nodes() if n.running)
        os.kill(node.actor_pid, signal.SIGSTOP)  # the node's actor freezes mid-run
        stopped.append(node)

    try:
        out = await run(
            backend, marked_program(marker), Limits(wall_seconds=1), on_stdout=on_stdout
        )
        # The host's deadline ended the run, not the program (it sleeps 30 s, still held
        # by the frozen node's child).
        assert holders(marker, stopped)
    finally:
        for node in stopped:
            os.kill(node.actor_pid, signal.SIGCONT)
    assert out.kind == "timeout" and "did not end the run within 1 s" in out.detail
    assert out.output.text == "started\n" and out.stats.node == stopped[0].name
    # Suspect, the node gets no runs until it answers again.
    assert stopped[0].node_id not in {n.node_id for n in backend.nodes()}
    assert node_id(await run(backend, "return 1")) != stopped[0].node_id
    # Resumed, the node's own clock has passed: its backend kills the program; it answers
    # the host's ping and takes runs again.
    assert await wait_until(lambda: not holders(marker, stopped))
    assert await wait_until(lambda: len(backend.nodes()) == 2)
    outcomes = [await run(backend, "return 1") for _ in range(2)]
    assert {o.stats.node for o in outcomes} == {n.name for n in backend.nodes()}


async def test_a_node_below_the_required_containment_fails_closed_as_locally(
    backend: RayBackend,
) -> None:
    weak = Containment(landlock=False)  # filesystem drops below full; require keeps it
    async with RayBackend(containment=weak) as remote, SubprocessBackend(weak) as local:
        far = await run(remote, "return 1")
        near = await run(local, "return 1")
    # The node's own backend decided, with the local words; the host adds which node.
    assert far.kind == near.kind == "sandbox-unavailable" and "filesystem is none" in near.detail
    assert far.detail == f"{near.detail} (on Ray node {far.stats.node})"
    assert {d: e.level for d, e in far.enforcement.items()} == {
        d: e.level for d, e in near.enforcement.items()
    }
    assert all(e.node == far.stats.node for e in far.enforcement.values())


# -- a node lost, a node joining, closing ------------------------------------------------


async def test_a_node_killed_mid_run_ends_that_run_as_worker_exit(
    env: Env, backend: RayBackend
) -> None:
    doomed = next(n for n in backend.nodes() if n.node_id == env.worker.node_id)
    doomed_pids = [doomed.actor_pid, doomed.zygote_pid or 0, *descendants(doomed.zygote_pid or 0)]
    doomed_scratch = node_scratch_dirs(doomed, env)
    assert doomed_scratch  # its pooled children's
    doomed_cgroups = cgroup_bases(doomed.actor_pid)
    assert run_cgroups(doomed_cgroups, doomed.actor_pid)
    outcomes: list[RunOutcome] = []
    started: list[str] = []
    abort = anyio.Event()

    async def launch() -> None:
        code = marked_program("held")
        outcomes.append(await run(backend, code, on_stdout=started.append, abort=abort))

    async with anyio.create_task_group() as tg:
        tg.start_soon(launch)
        tg.start_soon(launch)
        assert await wait_until(lambda: len(started) == 2, 10)
        assert [n.running for n in backend.nodes()] == [1, 1]  # one run on each node
        env.cluster.remove_node(env.worker, allow_graceful=False)  # SIGKILL, no goodbye
        assert await wait_until(lambda: len(outcomes) == 1, 15)
        abort.set()  # ends the surviving node's run
    lost, survivor = outcomes
    assert lost.kind == "worker-exit" and "was lost mid-run" in lost.detail, lost
    assert node_id(lost) == env.worker.node_id and env.worker.node_id in lost.detail
    assert lost.output.text == "started\n"
    assert survivor.kind == "abort" and node_id(survivor) == env.head_id
    # Later runs go to the remaining node, and nothing of the lost node's workers survives.
    later = [await run(backend, "return 1") for _ in range(3)]
    assert [o.value for o in later] == [1, 1, 1]
    assert {node_id(o) for o in later} == {env.head_id}
    assert await wait_until(lambda: all(gone(p) for p in doomed_pids), 10)
    # Its zygote removed what its host could not before it exited: nothing is left.
    assert doomed_scratch & scratch_dirs(env.scratch_root) == set()
    assert run_cgroups(doomed_cgroups, doomed.actor_pid) == []


async def test_a_node_that_joins_gets_runs(env: Env, backend: RayBackend) -> None:
    joined = env.cluster.add_node(num_cpus=1)
    landed: set[str] = set()
    deadline = time.monotonic() + 30
    while joined.node_id not in landed and time.monotonic() < deadline:
        landed.add(node_id(await run(backend, "import time\ntime.sleep(0.05)\nreturn 1")))
    assert landed == {env.head_id, joined.node_id}


async def test_the_scale_out_example_runs_on_the_cluster(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/scale-out.md's example as written; Ray is initialised already, so its
    # RayBackend(address="auto") uses this connection (and leaves Ray up when it closes).
    (example,) = re.findall(r"```python\n(.*?)```", SCALE_OUT.read_text(), flags=re.S)

    @ptc.tool
    def search(query: str) -> list[str]:
        """Search the notes."""
        return [query]

    namespace: dict[str, Any] = {"my_approver": approver, "search": search}
    exec(example, namespace)  # noqa: S102 - the documentation's own code
    await namespace["main"]()
    printed = capsys.readouterr().out.splitlines()[-1]  # Ray may print its own lines
    node, network = printed.split(" ", 1)
    assert node.partition("@")[0] in alive_node_ids()  # the node in the stats
    assert "'level': 'full'" in network
    assert ray.is_initialized()


SCALE_OUT = Path(__file__).resolve().parents[2] / "docs" / "scale-out.md"


def our_actors(nodes: Sequence[RayNode]) -> list[str]:
    """Named ptc actors Ray lists on these nodes (the GCS may still list the actor of the
    node killed earlier: it has not declared that node dead yet)."""
    ids = {n.node_id for n in nodes}
    named = [str(a["name"]) for a in ray.util.list_named_actors(all_namespaces=True)]
    return [n for n in named if n.startswith("ptc-node:") and n.rsplit(":", 1)[1] in ids]


async def test_close_leaves_no_actor_and_no_worker_process(env: Env, backend: RayBackend) -> None:
    nodes = backend.nodes()
    pids = [
        p for n in nodes for p in (n.actor_pid, n.zygote_pid or 0, *descendants(n.zygote_pid or 0))
    ]
    assert len(nodes) == 2 and all(not gone(p) for p in pids)
    assert len(pids) > 2 * len(nodes)  # actors, zygotes, and each zygote's pooled children
    assert len(our_actors(nodes)) == 2
    scratch = set().union(*(node_scratch_dirs(n, env) for n in nodes))
    assert scratch
    await backend.aclose()
    assert ray.is_initialized()  # Ray was initialised by the test, so it stays up
    assert our_actors(nodes) == []
    assert await wait_until(lambda: all(gone(p) for p in pids), 10)
    assert scratch & scratch_dirs(env.scratch_root) == set()
    with pytest.raises(WorkerError, match="closed"):
        await run(backend, "return 1")


async def test_a_backend_that_started_ray_shuts_it_down(env: Env) -> None:
    ray.shutdown()
    async with RayBackend(address=env.cluster.address) as own:
        assert (await run(own, "return 2")).value == 2
        pids = [n.actor_pid for n in own.nodes()]
    assert not ray.is_initialized()
    assert await wait_until(lambda: all(gone(p) for p in pids), 10)
