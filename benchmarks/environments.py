"""What ``run_code`` costs in each reference environment (DESIGN section 7, "Where hosts run").

``python -m benchmarks environments [--runs N] [--pace-ms MS] [--envs E1,E3,...]`` (root: the
environments are simulated per process by ``tests.environments``). In each, a host starts a
``ToolRuntime`` in code mode with the default ``Containment()`` where it runs, else with
``require`` cut to the dimensions that are ``full`` there (the rest is listed), warms up, and
times ``run_code("return 1")``: ``--runs`` calls ``--pace-ms`` apart (the pool refills between
them, as at an agent's pace) and as many back to back. Results:
``benchmarks/results/environments.{json,md}``, with the machine's load while they ran.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import _stats

RESULT_NAME = "environments"

HOST = '''
import json, sys, time
import anyio
import ptc, worker

DIMENSIONS = ("filesystem", "network", "processes", "memory", "cpu")


async def main(options):
    probe = worker.SubprocessBackend(ptc.Containment()).probe()
    short = [d for d in DIMENSIONS if probe[d].level != "full"]
    containment = ptc.Containment(require=frozenset(d for d in DIMENSIONS if d not in short))
    async with ptc.ToolRuntime(default_mode="code", containment=containment) as runtime:
        scope = runtime.root

        async def once():
            started = time.perf_counter()
            result = await scope.run_code("return 1")
            elapsed = (time.perf_counter() - started) * 1000.0
            if result.is_error:
                raise SystemExit(f"run_code failed: {result.error}")
            return elapsed

        for _ in range(options["warmup"]):
            await once()
        paced = []
        for _ in range(options["runs"]):
            await anyio.sleep(options["pace_ms"] / 1000.0)
            paced.append(await once())
        back_to_back = [await once() for _ in range(options["runs"])]
    return {
        "short": short,
        "levels": {d: e.level for d, e in probe.items()},
        "mechanisms": {d: e.mechanism for d, e in probe.items()},
        "paced_ms": paced,
        "back_to_back_ms": back_to_back,
    }


with open(sys.argv[1], encoding="utf-8") as fh:
    options = json.load(fh)
print(json.dumps(anyio.run(main, options)))
'''


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks environments", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=200, help="timed runs per pattern")
    parser.add_argument("--pace-ms", type=float, default=50.0, help="pause between paced runs")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs first")
    parser.add_argument("--envs", default="", help="comma-separated names (default: all)")
    parser.add_argument("--out", type=Path, default=_stats.RESULTS_DIR, help="results directory")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from tests import environments  # needs root; imported only when the suite runs

    reason = environments.unavailable()
    if reason is not None:
        _stats.progress(f"cannot simulate the environments here: {reason}")
        return 1
    harness = environments.harness()
    names = [n for n in args.envs.split(",") if n] or list(environments.ENVIRONMENTS)
    options = {"runs": args.runs, "pace_ms": args.pace_ms, "warmup": args.warmup}
    results: dict[str, Any] = {}
    load_before = os.getloadavg()
    for name in names:
        _stats.progress(f"{name}: {args.runs} paced and {args.runs} back-to-back runs")
        run = harness.run(name, HOST, inputs=options, timeout_s=60.0 + args.runs * 2.0)
        assert run.output is not None
        out = run.output
        results[name] = {
            "stands_for": environments.BY_NAME[name].stands_for,
            "short_by_default": out["short"],
            "levels": out["levels"],
            "mechanisms": out["mechanisms"],
            "paced_ms": _stats.summarize(out["paced_ms"]).as_dict(),
            "back_to_back_ms": _stats.summarize(out["back_to_back_ms"]).as_dict(),
            "left_behind": [*run.survivors, *run.leftovers],
        }
        paced = results[name]["paced_ms"]
        _stats.progress(f"{name}: paced p50 {paced['median']:.1f} ms, p99 {paced['p99']:.1f} ms")
    payload = {
        "machine": {
            **_stats.machine_facts(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "options": options,
        "environments": results,
    }
    _stats.write_results(RESULT_NAME, payload, _markdown(payload), args.out)
    return 0


def _markdown(payload: dict[str, Any]) -> str:
    machine = payload["machine"]
    rows = []
    for name, r in payload["environments"].items():
        short = ", ".join(r["short_by_default"]) or "none (default runs)"
        paced, b2b = r["paced_ms"], r["back_to_back_ms"]
        rows.append(
            [
                name,
                short,
                f"{paced['median']:.1f} / {paced['p99']:.1f}",
                f"{b2b['median']:.1f} / {b2b['p99']:.1f}",
            ]
        )
    load = ", ".join(f"{x:.1f}" for x in machine["load_average_before"])
    return (
        "# run_code in each reference environment\n\n"
        f"`python -m benchmarks environments` on {machine['platform']}, "
        f"{machine['cpu_count']} cores, {machine['date_utc']}; the hosts run the system "
        "Python's venv of `tests/environments`; load average (1, 5, 15 min) before: "
        f"{load}. `run_code(\"return 1\")`, "
        f"{payload['options']['runs']} runs {payload['options']['pace_ms']:g} ms apart and "
        "as many back to back; milliseconds, p50 / p99.\n\n"
        + _stats.markdown_table(
            ["env", "short of full by default (run with the rest)", "paced", "back to back"],
            rows,
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
