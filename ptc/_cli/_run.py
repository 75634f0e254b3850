"""``ptc run PROGRAM.py``: run a model-written program under full containment.

The program is what a model would send to ``run_code`` (a module; a top-level ``return``
or a trailing expression gives the result), run in a fresh contained worker with the
tools ``--tools MODULE:FUNC`` registers; ``--require`` names the containment dimensions
that must be full (default: all). Prints the captured output, the result and the
enforcement report (``--json``: the whole ``ToolResult``); the exit status is 1 when the
run failed, 2 for a usage problem.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from worker import Containment, Limits

from .._results import ToolResult
from .._runtime import ToolRuntime
from .._scopes._layers import PROFILES
from ._common import (
    CliError,
    add_require,
    call_tools_func,
    containment,
    help_text,
    load_tools,
)

__all__ = ("add_parser", "main")


def add_parser(sub: Any) -> None:
    """Add ``run`` to the ``ptc`` subcommands (``sub`` from ``add_subparsers``)."""
    run = sub.add_parser(
        "run",
        help="run a model-written program under containment",
        description=help_text(__doc__, 1),
    )
    run.add_argument("program", help="the program file (- reads stdin)")
    run.add_argument("--tools", metavar="MODULE:FUNC", help="FUNC(runtime) registers the tools")
    run.add_argument("--profile", choices=PROFILES, default="python", help="language profile")
    run.add_argument("--wall", type=float, metavar="S", help="wall-clock limit in seconds")
    run.add_argument("--memory", type=int, metavar="MIB", help="memory limit in MiB")
    add_require(run)
    run.add_argument("--json", action="store_true", help="print the whole ToolResult as JSON")


def main(args: argparse.Namespace) -> int:
    try:
        code = _read_program(args.program)
        options: dict[str, Any] = {}
        if args.wall is not None:
            options["wall_seconds"] = args.wall
        if args.memory is not None:
            options["memory_mib"] = args.memory
        try:
            limits = Limits(**options)
        except (TypeError, ValueError) as exc:
            raise CliError(f"bad limit: {exc}") from exc
        required = containment(args.require)
        tools = load_tools(args.tools) if args.tools else None
        result = anyio.run(_run, code, tools, args.profile, limits, required)
    except CliError as exc:
        print(f"ptc run: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(result.as_json(), indent=2, ensure_ascii=False) if args.json else None
    try:
        print(text if text is not None else _report(result), flush=True)
    except BrokenPipeError:  # `ptc run ... | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1 if result.is_error else 0


async def _run(
    code: str, tools: Any, profile: Any, limits: Limits, required: Containment | None
) -> ToolResult:
    async with ToolRuntime(
        default_mode="code", profile=profile, limits=limits, containment=required
    ) as runtime:
        if tools is not None:
            await call_tools_func(tools, runtime)
        return await runtime.root.run_code(code)


def _read_program(path: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read the program {path!r}: {exc}") from exc


def _report(result: ToolResult) -> str:
    """Captured output, then the result (or the error), then enforcement and stats."""
    lines: list[str] = []
    value = result.value if isinstance(result.value, dict) else {}
    stdout = value.get("stdout") or ""
    if result.error is not None:
        lines += ["== error ==", f"{result.error.code}: {result.error.message}".rstrip()]
    else:
        if stdout:
            lines += ["== output ==", str(stdout).rstrip("\n")]
        shown = value.get("result")
        lines += ["== result ==", shown if isinstance(shown, str) else json.dumps(shown, indent=2)]
    enforcement = result.meta.get("enforcement")
    if isinstance(enforcement, dict) and enforcement:
        lines.append("== enforcement ==")
        for dimension, report in enforcement.items():
            if not isinstance(report, dict):
                continue
            level, mechanism = report.get("level", "?"), report.get("mechanism", "")
            gap = f"  (gap: {report['gap']})" if report.get("gap") else ""
            lines.append(f"{dimension:<11} {level:<8} {mechanism}{gap}")
    stats = result.meta.get("stats")
    if isinstance(stats, dict):
        wall, cpu = stats.get("wall_ms", 0), stats.get("cpu_ms", 0)
        calls, peak = stats.get("calls", 0), stats.get("peak_memory_kib")
        memory = "peak memory not measured" if peak is None else f"peak memory {peak} KiB"
        lines += [
            "== stats ==",
            f"wall {wall:.0f} ms, cpu {cpu:.0f} ms, {calls} tool calls, {memory}",
        ]
    return "\n".join(lines)
