"""Native vs code mode on the example tools: turns, context bytes, tool calls, wall time.

``python -m benchmarks.native_vs_code [--quick] [--reps N] [--latency-ms 0,500]`` (or
``python -m benchmarks suite``). A scripted stand-in model drives native mode (one tool
round per turn, each result's content entering the context); code mode sends each task's
program in one ``run_code`` call; the multi-step task (``_multistep``) is done in three
steps, in code mode with and without a session. Every answer is checked against the expected one; a
wrong answer fails the run. Wall time with a model latency L is computed as measured wall +
turns x L (the latency is simulated arithmetically, never slept). ``--model PROVIDER:MODEL``
instead runs the tasks with a model through pydantic-ai and the ptc adapter (``--model test``:
pydantic-ai's FunctionModel playing the scripted model; see ``benchmarks/_model.py``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from ptc.examples import build_runtime

from . import _bfcl, _model, _multistep, _stats
from ._episodes import Episode, run_code, run_native, runtime_kwargs, spec_bytes
from ._mcp_tasks import MCP_TASK_NAMES, build_repo, git_tasks, mcp_runtime
from ._tasks import CATALOG_FILLER, CATALOG_TASKS, TASKS, Task

RESULT_NAME = "native_vs_code"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks suite", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="one repetition (for make demo)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per task and mode")
    parser.add_argument("--latency-ms", default="0,500",
                        help="simulated model latencies per turn, comma separated")
    parser.add_argument("--tasks", default="", help="comma-separated task names (default: all)")
    parser.add_argument("--relaxed-containment", action="store_true",
                        help="do not require full containment (hosts without namespaces etc.)")
    parser.add_argument("--out", type=Path, default=_stats.RESULTS_DIR, help="results directory")
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    _model.add_model_arguments(parser)
    return parser


def _selected(names: str) -> tuple[tuple[Task, ...], tuple[str, ...]]:
    """The example-tool tasks (the catalog ones included) and the names of the MCP tasks."""
    if not names:
        return TASKS + CATALOG_TASKS + (_multistep.TASK,), MCP_TASK_NAMES
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {t.name: t for t in (*TASKS, *CATALOG_TASKS, _multistep.TASK)}
    unknown = [n for n in wanted if n not in known and n not in MCP_TASK_NAMES]
    if unknown:
        raise SystemExit(f"unknown task(s) {unknown}; known: "
                         f"{', '.join([*known, *MCP_TASK_NAMES])}")
    return tuple(known[n] for n in wanted if n in known), tuple(
        n for n in wanted if n in MCP_TASK_NAMES)


class _Progress:
    def __init__(self, total: int) -> None:
        self.total, self.step, self.run = total, 0, 0


def _scopes(runtime: Any) -> tuple[Any, Any]:
    native, code = runtime.scope("bench-native"), runtime.scope("bench-code")
    native.present_as("native")
    code.present_as("code")
    return native, code


async def _run_multistep(native: Any, code: Any, reps: int, progress: _Progress,
                         rows: list[dict[str, Any]]) -> None:
    """The multi-step task: native, code without a session, code with one (a new session
    per episode: one per conversation)."""
    task = _multistep.TASK
    native_specs, code_specs = spec_bytes(native), spec_bytes(code)
    modes = (("native", None), ("code", _multistep.WITHOUT_SESSION),
             ("code+session", _multistep.WITH_SESSION))
    for mode, programs in modes:
        episodes: list[Episode] = []
        for _ in range(reps):
            progress.step += 1
            progress.run += 1
            if programs is None:
                episode = await run_native(native, task, progress.run, native_specs)
            elif mode == "code":
                episode = await _multistep.run_steps(code, programs, mode, progress.run,
                                                     code_specs)
            else:
                session = code.session()
                episode = await _multistep.run_steps(session, programs, mode, progress.run,
                                                     spec_bytes(session))
                await session.close()
            _stats.progress(f"{progress.step}/{progress.total} {task.name} [{mode}] "
                            f"{episode.wall_ms:.1f} ms, answer "
                            f"{'ok' if episode.correct else 'WRONG'}")
            episodes.append(episode)
        rows.append(_row(task, episodes))


async def _run_tasks(native: Any, code: Any, tasks: Sequence[Task], reps: int,
                     progress: _Progress, rows: list[dict[str, Any]]) -> dict[str, int]:
    """Every task ``reps`` times per mode; returns the specs' bytes."""
    specs = {"native": spec_bytes(native), "code": spec_bytes(code)}
    for task in tasks:
        for mode, runner, scope in (("native", run_native, native), ("code", run_code, code)):
            episodes: list[Episode] = []
            for _ in range(reps):
                progress.step += 1
                progress.run += 1
                episode = await runner(scope, task, progress.run, specs[mode])
                _stats.progress(f"{progress.step}/{progress.total} {task.name} [{mode}] "
                                f"{episode.wall_ms:.1f} ms, answer "
                                f"{'ok' if episode.correct else 'WRONG'}")
                episodes.append(episode)
            rows.append(_row(task, episodes))
    return specs


async def measure(tasks: Sequence[Task], *, reps: int, relaxed: bool,
                  mcp_tasks: Sequence[str] = ()) -> dict[str, Any]:
    """Run every task ``reps`` times per mode; returns rows (first episode + median wall).

    ``mcp_tasks`` run over a real MCP server (``mcp-server-git``) mounted with ``ptc.mcp``.
    """
    rows: list[dict[str, Any]] = []
    multistep = _multistep.TASK in tasks
    tasks = [t for t in tasks if t is not _multistep.TASK]
    progress = _Progress((len(tasks) + len(mcp_tasks)) * 2 * reps + 3 * reps * multistep)
    plain = [t for t in tasks if t not in CATALOG_TASKS]
    catalog = [t for t in tasks if t in CATALOG_TASKS]
    async with build_runtime(**runtime_kwargs(relaxed)) as runtime:
        native, code = _scopes(runtime)
        baseline = [await _timed_constant(code) for _ in range(max(3, reps))]
        specs = await _run_tasks(native, code, plain, reps, progress, rows)
        if multistep:
            await _run_multistep(native, code, reps, progress, rows)
    if catalog:
        async with build_runtime(**runtime_kwargs(relaxed)) as runtime:
            # The example tools among CATALOG_FILLER BFCL definitions (none of the same name).
            taken = set(runtime.root.view().visible)
            fillers = [d for d in _bfcl.definitions(CATALOG_FILLER + len(taken))
                       if d.name not in taken][:CATALOG_FILLER]
            with runtime.root.batch():
                for definition in fillers:
                    runtime.register(definition)
            native, code = _scopes(runtime)
            await code.prepare()
            await _run_tasks(native, code, catalog, reps, progress, rows)
    if mcp_tasks:
        with tempfile.TemporaryDirectory(prefix="ptc-bench-") as tmp:
            repo = build_repo(Path(tmp) / "repo")
            selected = [t for t in git_tasks(repo) if t.name in mcp_tasks]
            async with mcp_runtime(repo, **runtime_kwargs(relaxed)) as runtime:
                await _run_tasks(*_scopes(runtime), selected, reps, progress, rows)
    return {"specs_bytes": specs, "run_code_constant_ms": statistics.median(baseline),
            "rows": rows}


async def _timed_constant(scope: Any) -> float:
    started = time.perf_counter()
    result = await scope.run_code("return None")
    if result.is_error:
        raise RuntimeError(f"run_code failed: {result.error.message}")
    return (time.perf_counter() - started) * 1000


def _row(task: Task, episodes: list[Episode]) -> dict[str, Any]:
    first = episodes[0]
    return {
        "task": task.name, "kind": task.kind, "mode": first.mode,
        "correct": all(e.correct for e in episodes), "answer": first.answer,
        "model_turns": first.model_turns, "context_bytes": first.context_bytes,
        "est_tokens": first.context_bytes // 4,
        "input_bytes_all_turns": first.input_bytes_all_turns,
        "model_tool_calls": first.model_tool_calls,
        "tool_calls_executed": first.tool_calls_executed,
        "wall_ms_samples": [e.wall_ms for e in episodes],
        "wall_ms_median": statistics.median(e.wall_ms for e in episodes),
        "run_code_ms_median": (statistics.median(e.run_code_ms for e in episodes
                                                 if e.run_code_ms is not None)
                               if first.run_code_ms is not None else None),
    }


def render_markdown(result: dict[str, Any], latencies: Sequence[float]) -> str:
    header = ["Task", "Mode", "Turns", "Context bytes", "~Tokens (est.)", "Input bytes, all turns",
              "Calls (model / executed)"]
    header += [f"Wall ms @{lat:g} ms/turn" for lat in latencies] + ["run_code ms"]
    rows = []
    for r in result["rows"]:
        walls = [r["wall_ms_median"] + r["model_turns"] * lat for lat in latencies]
        rows.append([r["task"], r["mode"], r["model_turns"], r["context_bytes"], r["est_tokens"],
                     r["input_bytes_all_turns"],
                     f"{r['model_tool_calls']} / {r['tool_calls_executed']}", *walls,
                     "-" if r["run_code_ms_median"] is None else r["run_code_ms_median"]])
    notes = (
        f"\nTool specs sent: native {result['specs_bytes']['native']:,} B, code "
        f"{result['specs_bytes']['code']:,} B (run_code spec + SDK). run_code returning a "
        f"constant on the same runtime: {result['run_code_constant_ms']:.1f} ms (median).\n"
        "Wall = measured median wall + turns x simulated latency (computed, not slept). "
        "Tokens = bytes / 4, an estimate. Answers checked equal to the expected answer in "
        "both modes.\n"
    )
    return _stats.markdown_table(header, rows) + notes


def write_chart(result: dict[str, Any], latency_ms: float, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in result["rows"]))
    by = {(r["task"], r["mode"]): r for r in result["rows"]}
    metrics = [("context_bytes", "context bytes (log)", True, 0.0),
               ("model_turns", "model turns", False, 0.0),
               ("wall", "wall ms @ 0 ms/turn (log)", True, 0.0),
               ("wall", f"wall ms @ {latency_ms:g} ms/turn", False, latency_ms)]
    fig, axes = plt.subplots(1, 4, figsize=(20, 5.5))
    positions = range(len(tasks))
    for ax, (key, label, log, latency) in zip(axes, metrics, strict=True):
        for offset, mode in ((-0.2, "native"), (0.2, "code")):
            values = [by[(t, mode)]["wall_ms_median"] + by[(t, mode)]["model_turns"] * latency
                      if key == "wall" else by[(t, mode)][key] for t in tasks]
            ax.bar([p + offset for p in positions], values, width=0.4, label=mode)
        ax.set_title(label)
        ax.set_xticks(list(positions), tasks, rotation=60, ha="right", fontsize=8)
        if log:
            ax.set_yscale("log")
    axes[0].legend()
    fig.suptitle("ptc: native vs code mode per task (scripted model)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tasks, mcp_tasks = _selected(args.tasks)
    if args.model:  # the model path runs the one-program tasks
        return _model.main_with_model(args, tuple(t for t in tasks if t is not _multistep.TASK))
    reps = 1 if args.quick else max(1, args.reps)
    latencies = [float(x) for x in args.latency_ms.split(",") if x.strip()]
    count = len(tasks) + len(mcp_tasks)
    _stats.progress(f"native vs code: {count} tasks x 2 modes x {reps} rep(s)")
    result = anyio.run(lambda: measure(tasks, reps=reps, relaxed=args.relaxed_containment,
                                       mcp_tasks=mcp_tasks))
    wrong = [f"{r['task']} [{r['mode']}]" for r in result["rows"] if not r["correct"]]
    markdown = "# Native vs code mode (scripted model)\n\n" + render_markdown(result, latencies)
    payload = {"machine": _stats.machine_facts(), "reps": reps, "latencies_ms": latencies,
               "latency_method": "computed: measured wall + turns x latency", **result}
    json_path, md_path = _stats.write_results(RESULT_NAME, payload, markdown, args.out)
    print(markdown)
    print(f"results: {json_path} and {md_path}")
    if not args.no_chart:
        chart = write_chart(result, max(latencies, default=0.0), args.out / f"{RESULT_NAME}.png")
        print(f"chart: {chart}")
    if wrong:
        print(f"WRONG ANSWERS: {', '.join(wrong)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
