"""Code mode on a Ray cluster vs on this machine: trivial runs per second and the nested
call round trip, with the local ``SubprocessBackend``, a one-node and a two-node local Ray
cluster, all measured in one run, through ``ptc.ToolRuntime`` end to end.

``python -m benchmarks.ray_bench [--runs 300] [--concurrency 8] [--calls 1000]``. Ray must
bind 127.0.0.1 only, so the benchmark runs inside a network namespace of its own: started
outside one (as root), it re-executes itself under ``unshare -n``. Both Ray nodes share
this machine's cores, so two nodes show Ray's overhead, not a second machine's capacity.
Writes ``benchmarks/results/ray.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

import ptc
from worker import SubprocessBackend, WorkerBackend

from . import _stats

NESTED = """
import time
laps = []
for i in range({n}):
    t = time.perf_counter()
    tools.echo(x=i)
    laps.append(time.perf_counter() - t)
return laps
"""
NODE_CPUS = 2


def isolated() -> bool:
    """True inside a network namespace with nothing but loopback."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def reexec_isolated(argv: Sequence[str]) -> None:
    """Replace this process with itself under ``unshare -n`` (loopback up), or exit."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise SystemExit(
            "ray_bench: needs its own network namespace (Ray would bind this machine's "
            "external interface): run it as root, or under `unshare -rn`, with lo up"
        )
    script = 'ip link set lo up && exec "$0" -m benchmarks.ray_bench "$@"'
    os.execvp("unshare", ["unshare", "-n", "sh", "-c", script, sys.executable, *argv])


def _q(samples: Sequence[float], scale: float) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": statistics.median(ordered) * scale,
        "p99": _stats.percentile(ordered, 0.99) * scale,
        "n": len(ordered),
    }


async def measure(
    backend: WorkerBackend, *, runs: int, concurrency: int, calls: int
) -> dict[str, Any]:
    """Throughput of ``run_code("return 1")`` and the nested call's round trip."""
    limits = ptc.Limits(max_calls=calls + 10, wall_seconds=60)
    async with ptc.ToolRuntime(backend=backend, limits=limits) as runtime:

        @runtime.tool(concurrency_safe=True)
        async def echo(x: int) -> int:
            """Return x."""
            return x

        agent = runtime.scope("bench")
        agent.present_as("code")
        for _ in range(4):  # warm: SDK generated, pools filled, actors' code loaded
            result = await agent.run_code("return 1")
            assert not result.is_error, result.content
        nodes: dict[str, int] = {}
        latencies: list[float] = []
        left = runs

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                t = time.perf_counter()
                result = await agent.run_code("return 1")
                latencies.append(time.perf_counter() - t)
                assert not result.is_error, result.content
                stats: Any = result.meta["stats"]
                node = str(stats.get("node", "local"))
                nodes[node] = nodes.get(node, 0) + 1

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
        elapsed = time.perf_counter() - started
        alone = []
        for _ in range(60):  # one at a time: the cost of a run itself, no queueing
            t = time.perf_counter()
            result = await agent.run_code("return 1")
            alone.append(time.perf_counter() - t)
            assert not result.is_error, result.content
        result = await agent.run_code(NESTED.format(n=calls))
        assert not result.is_error, result.content
        value: Any = result.value
        nested = [float(x) for x in value["result"]]
        return {
            "runs_per_s": runs / elapsed,
            "run_code_ms": _q(latencies, 1e3),
            "run_code_alone_ms": _q(alone, 1e3),
            "nested_call_us": _q(nested, 1e6),
            "runs_per_node": sorted(nodes.values(), reverse=True),
        }


async def node_loss(backend: Any, cluster: Any, doomed: Any) -> dict[str, Any]:
    """Milliseconds from SIGKILL of a node mid-run to that run's ``worker-exit`` outcome."""
    from worker import Limits, RunOutcome, RunRequest

    async def no_calls(calls: Any) -> list[Any]:
        raise AssertionError("no calls expected")

    request = RunRequest(
        code="import time\nprint('up', flush=True)\ntime.sleep(30)",
        sdk_module="",
        limits=Limits(wall_seconds=30),
    )
    started: list[str] = []
    both_started, first_ended, abort = anyio.Event(), anyio.Event(), anyio.Event()
    outcomes: list[tuple[float, RunOutcome]] = []

    def on_stdout(text: str) -> None:
        started.append(text)
        if len(started) == 2:
            both_started.set()

    async def one() -> None:
        out = await backend.run(request, on_calls=no_calls, on_stdout=on_stdout, abort=abort)
        outcomes.append((time.perf_counter(), out))
        first_ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
        await both_started.wait()
        killed = time.perf_counter()
        cluster.remove_node(doomed, allow_graceful=False)
        await first_ended.wait()
        abort.set()
    at, lost = outcomes[0]
    assert lost.kind == "worker-exit", lost
    return {"ms": (at - killed) * 1e3, "detail": lost.detail}


@asynccontextmanager
async def ray_cluster(nodes: int) -> AsyncIterator[tuple[Any, Any]]:
    """A local cluster of ``nodes`` nodes (``NODE_CPUS`` CPUs each) and a RayBackend on it."""
    import ray
    from ray.cluster_utils import Cluster

    from worker.ray import RayBackend

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": NODE_CPUS})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=NODE_CPUS)
    try:
        async with RayBackend(address=cluster.address, init_options={"log_to_driver": False}) as b:
            assert len(b.nodes()) == nodes, b.nodes()
            yield cluster, b
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


async def bench(runs: int, concurrency: int, calls: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _stats.progress("local SubprocessBackend")
    async with SubprocessBackend() as local:
        out["local"] = await measure(local, runs=runs, concurrency=concurrency, calls=calls)
    for nodes in (1, 2):
        _stats.progress(f"Ray, {nodes} node(s)")
        async with ray_cluster(nodes) as (cluster, backend):
            out[f"ray_{nodes}_node"] = await measure(
                backend, runs=runs, concurrency=concurrency, calls=calls
            )
            if nodes == 2:
                _stats.progress("Ray, a node killed mid-run")
                doomed = cluster.list_all_nodes()[-1]  # not the head
                out["node_loss"] = await node_loss(backend, cluster, doomed)
    return out


def render(result: dict[str, Any], args: argparse.Namespace) -> str:
    labels = {
        "local": "local `SubprocessBackend`",
        "ray_1_node": "Ray, 1 node",
        "ray_2_node": "Ray, 2 nodes",
    }
    rows = []
    for key, label in labels.items():
        r = result[key]
        rows.append(
            [
                label,
                round(r["runs_per_s"], 1),
                round(r["run_code_ms"]["p50"], 2),
                round(r["run_code_ms"]["p99"], 2),
                round(r["run_code_alone_ms"]["p50"], 2),
                round(r["run_code_alone_ms"]["p99"], 2),
                round(r["nested_call_us"]["p50"], 1),
                round(r["nested_call_us"]["p99"], 1),
                " / ".join(str(n) for n in r["runs_per_node"]),
            ]
        )
    header = [
        "backend",
        "trivial runs/s",
        f"run_code p50, {args.concurrency} at a time (ms)",
        f"run_code p99, {args.concurrency} at a time (ms)",
        "run_code p50, alone (ms)",
        "run_code p99, alone (ms)",
        "nested call p50 (µs)",
        "nested call p99 (µs)",
        "runs per node",
    ]
    return (
        "# Code mode on Ray vs locally\n\n"
        f"`python -m benchmarks.ray_bench --runs {args.runs} --concurrency {args.concurrency} "
        f'--calls {args.calls}`: `run_code("return 1")` through `ptc.ToolRuntime`, '
        f"{args.runs} runs {args.concurrency} at a time, then 60 one at a time; nested call = "
        "one SDK call to a trivial async tool, "
        "timed inside the program. Ray nodes are local (same 2 cores), "
        f"{NODE_CPUS} CPUs each; full containment everywhere.\n\n"
        + _stats.markdown_table(header, rows)
        + f"\nLoad average (1 min) {result['load_average_1min']['before']:.1f} before, "
        f"{result['load_average_1min']['after']:.1f} after (the machine is shared).\n"
        + "\nA node killed (SIGKILL of its raylet) mid-run: that run ended as `worker-exit` "
        f'{result["node_loss"]["ms"]:.0f} ms later ("{result["node_loss"]["detail"]}").\n'
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ray_bench")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args(argv)
    if not isolated():
        reexec_isolated(argv)
    load_before = os.getloadavg()[0]
    result = anyio.run(bench, args.runs, args.concurrency, args.calls)
    result["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    markdown = render(result, args)
    payload = {"machine": _stats.machine_facts(), "args": vars(args), **result}
    json_path, md_path = _stats.write_results("ray", payload, markdown)
    print(markdown)
    print(f"results: {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
