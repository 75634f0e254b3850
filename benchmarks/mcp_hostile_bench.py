"""Hostile MCP peers: what one misbehaving server costs a host that mounted it (DESIGN
section 9, "Hostile peers"). Loopback and local subprocesses only.

Run: .venv/bin/python -m benchmarks.mcp_hostile_bench [--probe NAME]... [--quick]
Writes benchmarks/results/mcp_hostile.json and .md. Per probe: the outcome of the hostile
call (error code and message head), its wall time, the longest event-loop stall seen by a
heartbeat task (a 2 ms sleep in a loop; the stall is the longest gap between two wakes
minus the sleep), the host's resident memory growth, and whether the next call on the same
mount answers. ``--quick`` shrinks the sizes (for a smoke run, not for the figures).

The hostile server is tests/mcp/hostile_server.py (the official SDK's low-level server,
raw bytes where the SDK cannot misbehave enough), started as a subprocess.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import resource
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

import ptc
from ptc import mcp as ptc_mcp

from ._host import describe, host_facts, load
from ._hostile_clients import http_disconnect, many_runs, stdio_ctrl_c

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "mcp" / "hostile_server.py"
RESULTS = ROOT / "benchmarks" / "results"
BOUND = 90.0  # no probe may take longer; "no answer" is reported instead
# A table row of 10 columns: 11 JSON values.
ROW = json.dumps(
    {"id": 1, "name": "widget", "price": 9.5, "qty": 3, "ok": True, "tag": "a", "note": None,
     "sku": "X-1", "w": 0.25, "h": 12}, separators=(",", ":"),
)  # fmt: skip


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Heartbeat:
    """The longest stall of the event loop while it runs, and the peak RSS it sampled."""

    def __init__(self) -> None:
        self.stall_ms = 0.0
        self.peak_rss = _rss_mib()

    async def run(self) -> None:
        last = time.perf_counter()
        while True:
            await anyio.sleep(0.002)
            now = time.perf_counter()
            self.stall_ms = max(self.stall_ms, (now - last - 0.002) * 1e3)
            self.peak_rss = max(self.peak_rss, _rss_mib())
            last = now


def hostile(*listing: str, names: list[str] | None = None) -> ptc_mcp.StdioServer:
    args = [str(HOSTILE)]
    for kind in listing:
        args += ["--list", kind]
    if names:
        args += ["--names-json", json.dumps(names)]
    return ptc_mcp.stdio(sys.executable, *args)


def _supported(**options: Any) -> dict[str, Any]:
    """Only the mount options this version of ptc has (the same script measures before
    and after)."""
    accepted = inspect.signature(ptc_mcp.mount).parameters
    return {k: v for k, v in options.items() if k in accepted}


def _unlabelled(text: str) -> str:
    """A message without the hostile server's command line (the same in every row)."""
    return re.sub(r"MCP server '[^']*'(: )?", "", text)


def _outcome(result: ptc.ToolResult | None) -> str:
    if result is None:
        return f"no answer within {BOUND:g} s"
    if result.error is None:
        return "ok" if not isinstance(result.value, str) else f"ok ({len(result.value):,} chars)"
    return f"{result.error.code}: {_unlabelled(result.error.message)[:140]}"


async def _measured(
    body: Callable[[ptc.ToolRuntime, dict[str, Any]], Awaitable[None]],
) -> dict[str, Any]:
    row: dict[str, Any] = {}
    beat = Heartbeat()
    rss0 = _rss_mib()
    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        group.start_soon(beat.run)
        runtime = ptc.ToolRuntime()
        close_started = None
        try:
            async with runtime:
                try:
                    await body(runtime, row)
                except Exception as exc:  # noqa: BLE001 - the outcome of the probe
                    text = _unlabelled(str(exc))[:160]
                    row.setdefault("outcome", f"{type(exc).__name__}: {text}")
                close_started = time.perf_counter()
        finally:
            if close_started is not None:
                row["close_s"] = round(time.perf_counter() - close_started, 2)
        group.cancel_scope.cancel()
    row["total_s"] = round(time.perf_counter() - started, 2)
    row["loop_stall_ms"] = round(beat.stall_ms, 1)
    row["rss_growth_mib"] = round(beat.peak_rss - rss0, 1)
    return row


async def _call(scope: ptc.Scope, name: str, args: dict[str, Any], row: dict[str, Any]) -> None:
    started = time.perf_counter()
    result = None
    with anyio.move_on_after(BOUND):
        result = await scope.call(name, args)
    row["call_s"] = round(time.perf_counter() - started, 2)
    row["outcome"] = _outcome(result)
    result = None
    with anyio.move_on_after(30):
        result = await scope.call("ok", {"text": "still there?"})
    row["next_call"] = _outcome(result)


def call_probe(
    name: str, args: dict[str, Any], **options: Any
) -> Callable[[ptc.ToolRuntime, dict[str, Any]], Awaitable[None]]:
    async def body(runtime: ptc.ToolRuntime, row: dict[str, Any]) -> None:
        await ptc_mcp.mount(runtime.root, hostile(), **_supported(**options))
        await _call(runtime.root, name, args, row)

    return body


def mount_probe(
    *listing: str,
    names: list[str] | None = None,
    code: bool = False,
    compile_stub: bool = True,
    **options: Any,
) -> Callable[[ptc.ToolRuntime, dict[str, Any]], Awaitable[None]]:
    """Mount a server listing ``listing``; ``code``: then present the scope as code and
    prepare it (and compile the stub, unless not ``compile_stub``: compiling 20,000 tools'
    stub is the probe's own work, and holds the loop for tens of seconds)."""

    async def body(runtime: ptc.ToolRuntime, row: dict[str, Any]) -> None:
        scope = runtime.scope("agent")
        started = time.perf_counter()
        try:
            with anyio.fail_after(BOUND):
                mounted = await ptc_mcp.mount(
                    scope, hostile(*listing, names=names), **_supported(**options)
                )
        finally:
            row["mount_s"] = round(time.perf_counter() - started, 2)
        row["outcome"] = f"mounted {len(mounted.names)} tools, skipped {len(mounted.skipped)}"
        if names:
            row["outcome"] += f"; registered {[n for n in mounted.names if n in names]!r}"
        if code:
            scope.present_as("code")
            started = time.perf_counter()
            with anyio.move_on_after(10):  # start the SDK build, then close while it runs
                try:
                    await scope.prepare()
                    if compile_stub:
                        compile(scope.sdk(), "<stub>", "exec")
                except Exception as exc:  # noqa: BLE001 - the outcome of the probe
                    row["outcome"] += f"; the stub: {type(exc).__name__}: {str(exc)[:80]}"
                else:
                    row["outcome"] += "; the stub compiles" if compile_stub else "; prepared"
            row["prepare_s"] = round(time.perf_counter() - started, 2)

    return body


def probes(quick: bool) -> dict[str, Callable[[ptc.ToolRuntime, dict[str, Any]], Awaitable[None]]]:
    scale = 0.05 if quick else 1.0
    return {
        "bad_utf8": call_probe("bad_utf8", {}),
        "blocks_1m": call_probe("blocks", {"n": int(1_000_000 * scale)}),
        # Many tiny values within the byte limit (4 MiB of blocks, 2 MB of zeros): refused
        # by max_reply_values as they are read.
        "blocks_150k_within_bytes": call_probe("blocks", {"n": int(150_000 * scale)}),
        "structured_1m_zeros_within_bytes": call_probe("structured", {"n": int(1e6 * scale)}),
        # What the default limits let through: the residual stall. 24,993 items make the
        # reply exactly 25,000 values; empty arrays cost the most per value; a table of
        # 2,271 rows of 10 columns (24,988 values) is what a real reply looks like.
        "structured_25k_zeros_at_limit": call_probe("structured", {"n": 24_993}),
        "structured_25k_table_at_limit": call_probe("structured", {"n": 2_271, "item": ROW}),
        "structured_25k_empty_arrays_at_limit": call_probe(
            "structured", {"n": 24_993, "item": "[]"}
        ),
        "meta_25k_zeros_at_limit": call_probe("meta", {"n": 24_990}),
        "blocks_1000_at_limit": call_probe("blocks", {"n": 1000}),
        "text_100mb_timeout20": call_probe("text", {"mib": 100 * scale}, timeout_seconds=20),
        "never_default_mount": call_probe("never", {}),
        "image_50mb": call_probe("image", {"mib": 50 * scale}),
        "nested_schema_150": mount_probe("nested=150", on_bad_schema="skip"),
        "schema_18mb_lenient": mount_probe(f"schema_mib={18.8 * scale}", on_bad_schema="lenient"),
        # A 15 MB listing of tiny values (within its 16 MiB): refused by its values;
        # then the most a listing may hold (100,000 values; empty arrays cost the most).
        "listing_15mb_zeros": mount_probe(f"values={int(7_500_000 * scale)}"),
        "listing_100k_zeros_at_limit": mount_probe(f"values={int(99_900 * scale)}"),
        "listing_100k_empty_arrays_at_limit": mount_probe(f"values={int(99_900 * scale)}:[]"),
        "tools_20k_code_close": mount_probe(
            f"tools={int(20_000 * scale)}", code=True, compile_stub=False
        ),
        "name_evil_newline": mount_probe(names=["evil\n"], on_bad_schema="skip"),
        "description_quotes": mount_probe("description", code=True),
        # After the fix the default max_tools refuses 20,000: raised (the server's own
        # ten tools included), to time the close.
        "tools_20k_max_tools_raised": mount_probe(
            f"tools={int(20_000 * scale)}", code=True, compile_stub=False, max_tools=20_010
        ),
        "serve_400_runs_64mib": many_runs(int(400 * scale) or 1, 64),
        "http_disconnect_mid_run": http_disconnect(),
        "stdio_ctrl_c_stdin_open": stdio_ctrl_c(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--probe", action="append", default=[])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--limit", type=float, default=BOUND * 4, help="seconds per probe")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # run one probe, print its row
    args = parser.parse_args(argv)
    table = probes(args.quick)
    if args.one:
        print(json.dumps(anyio.run(_measured, table[args.one])))
        return 0
    chosen = args.probe or list(table)
    machine = host_facts()  # the load average (other work shares the machine) included
    rows: dict[str, dict[str, Any]] = {}
    for name in chosen:
        # One process per probe: its memory growth is its own.
        command = [sys.executable, "-m", "benchmarks.mcp_hostile_bench", "--one", name]
        command += ["--quick"] if args.quick else []
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=args.limit, cwd=ROOT
            )
        except subprocess.TimeoutExpired:
            rows[name] = {"outcome": f"the probe did not end within {args.limit:g} s (killed)",
                          "loop_stall_ms": "", "rss_growth_mib": ""}  # fmt: skip
        else:
            lines = done.stdout.strip().splitlines()
            try:
                rows[name] = json.loads(lines[-1])
            except (IndexError, ValueError):
                rows[name] = {"outcome": f"the probe failed: {done.stderr.strip()[-300:]}",
                              "loop_stall_ms": "", "rss_growth_mib": ""}  # fmt: skip
        print(f"{name:24} {json.dumps(rows[name])}", flush=True)
    machine["load_average_at_end"] = load()
    write_results(rows, args.out, "mcp_hostile" + ("_quick" if args.quick else ""), machine)
    return 0


def write_results(
    rows: dict[str, dict[str, Any]], out: Path, stem: str, machine: dict[str, Any]
) -> None:
    """``<stem>.json`` (the rows as measured, and the machine) and ``<stem>.md`` (the
    machine and its load, then a table: the extra figures of a probe go to its outcome; the
    server's command line is left out)."""
    out.mkdir(parents=True, exist_ok=True)
    payload = {"python": sys.version.split()[0], "max_rss_kib": _maxrss(), "machine": machine,
               "rows": rows}  # fmt: skip
    (out / f"{stem}.json").write_text(json.dumps(payload, indent=2) + "\n")
    columns = ["probe", "outcome", "call/mount s", "loop stall ms", "RSS growth MiB", "next call",
               "close s"]  # fmt: skip
    lines = [f"Host: {describe(machine)}", ""]
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    shown = {"call_s", "mount_s", "outcome", "loop_stall_ms", "rss_growth_mib", "next_call",
             "close_s", "total_s"}  # fmt: skip
    for name, row in rows.items():
        took = row.get("call_s", row.get("mount_s", ""))
        outcome = _unlabelled(str(row.get("outcome", "")))
        extra = ", ".join(f"{k} {v}" for k, v in row.items() if k not in shown)
        outcome += f" ({extra})" if extra else ""
        lines.append(
            f"| {name} | {outcome} | {took} | {row['loop_stall_ms']} |"
            f" {row['rss_growth_mib']} | {row.get('next_call', '')} | {row.get('close_s', '')} |"
        )
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    raise SystemExit(main())
