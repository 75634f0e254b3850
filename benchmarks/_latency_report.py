"""The latency suite's report: the sample table, ratios against baselines, the waterfall of a
run, event-loop stalls and the section-8 targets with a verdict each."""

from __future__ import annotations

from typing import Any

from . import _stats
from ._host import describe
from ._latency_parts import CPU_PROGRAMS
from ._latency_sessions import FORK, PACED

WARM = "run_code constant, warm, 50 ms apart"
B2B = "run_code constant, back to back"
SUBPROCESS = "subprocess python -I -c (same program)"
SMOL = "smolagents LocalPythonExecutor constant"
IN_PROCESS = "in-process pipeline call (native scope)"
THOUSAND = "run_code with 1000 sequential nested calls"
NESTED = "nested call, timed in the program"
KILL = "kill: returned after deadline"
CONCURRENT = "20 concurrent runs (batch wall)"
MONTY_WARM = "monty constant, 50 ms apart"
MONTY_B2B = "monty constant, back to back"
MONTY_CALL = "monty external call (mean of 1000)"
STALL_LIMIT_MS = 5.0


def _ratios(p50: dict[str, float]) -> list[tuple[str, str, str]]:
    pairs = [(MONTY_WARM, WARM), (MONTY_B2B, B2B), (SUBPROCESS, B2B), (SUBPROCESS, WARM),
             (SMOL, B2B), ("smolagents 1000 in-process calls", THOUSAND)]
    for label in CPU_PROGRAMS:
        for profile in ("python", "restricted"):
            ours = f"{label}: ptc {profile}"
            pairs += [(f"{label}: smolagents", ours),
                      (f"{label}: in-process exec (no isolation)", ours)]
    pairs.append(("sum 1..10^6 loop: monty", "sum 1..10^6 loop: ptc python"))
    return [(a, b, f"{p50[a] / p50[b]:.3g}x") for a, b in pairs if a in p50 and b in p50]


def _targets(p: dict[str, _stats.Summary], facts: dict[str, Any]) -> list[list[object]]:
    rows: list[list[object]] = []

    def check(name: str, figure: float | None, limit: float, unit: str, *, at_least: bool = False,
              note: str = "") -> None:
        bound = f"{'>=' if at_least else '<='} {limit:g} {unit}"
        if figure is None:
            rows.append([name, "not measured", bound, "-", note])
            return
        met = figure >= limit if at_least else figure <= limit
        rows.append([name, f"{figure:,.3f} {unit}", bound, "met" if met else "NOT met", note])

    def get(name: str, attr: str = "median") -> float | None:
        return getattr(p[name], attr) if name in p else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    check("run_code constant p50, 50 ms apart", get(WARM), 1.5, "ms")
    check("run_code constant p99, 50 ms apart", get(WARM, "p99"), 5, "ms")
    check("run_code constant p50, back to back", get(B2B), 4, "ms")
    cpu = facts.get("cpu_ms_per_back_to_back_run", {})
    faults = facts.get("minor_faults_per_back_to_back_run", {})
    check("CPU per back-to-back run: the run's own processes", cpu.get("children"), 5, "ms")
    check("page faults per back-to-back run: the run's own processes", faults.get("children"),
          600, "")
    check("CPU per back-to-back run: the zygote", cpu.get("zygote"), 1, "ms")
    check("CPU per back-to-back run: the host", cpu.get("host"), 2, "ms")
    floor = facts.get("floor_per_run")
    ours = sum(cpu.get(k, 0.0) for k in ("host", "zygote", "children")) if cpu else None
    least = floor["child_cpu_ms"] + floor["parent_cpu_ms"] if floor else None
    check("CPU per back-to-back run (host, zygote, children) / the floor's", ratio(ours, least),
          2, "x", note="the floor: a bare fork of a preloaded Python running 1, same run")
    nested = get(NESTED)
    nested_us = nested * 1000 if nested is not None else None
    check("nested call round trip p50", nested_us, 150, "us",
          note="timed in the program around each SDK call (trivial async tool)")
    monty = get(MONTY_CALL)
    check("nested p50 / Monty external call (mean)", ratio(nested, monty), 1, "x",
          note=f"1,000-call mean for ptc: {facts.get('nested_round_trip_us', 0):,.1f} us")
    check("nested p50 / in-process pipeline call p50", ratio(nested, get(IN_PROCESS)), 3, "x")
    stall_rows = facts.get("stalls_ms", {})
    for op in ("register (one by one, then prepare)", "present_as (then prepare)",
               "model_tools", "sdk", "a tool change (then prepare)", "run_code"):
        check(f"worst event-loop stall: {op}", stall_rows.get(op), STALL_LIMIT_MS, "ms",
              note="200 tools, cold SDK cache, heartbeat task")
    check("register 200 one by one / at once (wall to prepared)",
          ratio(stall_rows.get("register_one_by_one_ms"), stall_rows.get("register_at_once_ms")),
          1.5, "x")
    check("kill: returned after deadline, p99", get(KILL, "p99"), 50, "ms",
          note="includes result reporting; an upper bound on tree-gone time")
    procs = [p_ for p_ in facts.get("idle_pss_kib", []) if p_["pss_kib"] is not None]
    deepest = max((p_["depth"] for p_ in procs), default=0)
    pooled = [p_["pss_kib"] for p_ in procs if p_["depth"] == deepest and deepest >= 2]
    between = [p_["pss_kib"] for p_ in procs if 1 < p_["depth"] < deepest]
    check("idle pooled child PSS (max)", max(pooled) / 1024 if pooled else None, 5, "MiB",
          note=f"{len(pooled)} children at depth {deepest}; plus {len(between)} processes "
               f"between them and the zygote, max {max(between, default=0) / 1024:.1f} MiB")
    sizes = facts.get("session_state_bytes", {})
    for label, limit in (("64 KiB", 1.5), ("1 MiB", 15.0)):
        paced, sessionless = get(PACED.format(label)), get(WARM)
        added = paced - sessionless if paced is not None and sessionless is not None else None
        check(f"run_code p50 on a session with {label} of state - sessionless p50", added,
              limit, "ms", note=f"{sizes.get(label, 0):,} bytes kept; both paced 50 ms apart")
    check("fork() of a 1 MiB session p50 (host)", get(FORK), 1, "ms")
    check("20 concurrent runs: failures", facts.get("concurrent_failures"), 0, "")
    check("trivial runs/s at 20 concurrent", facts.get("concurrent_runs_per_second"), 250, "/s",
          at_least=True)
    return rows


def render(samples: dict[str, list[float]], facts: dict[str, Any],
           machine: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    summaries = {name: _stats.summarize(values) for name, values in samples.items()}
    p50 = {name: s.median for name, s in summaries.items()}
    rows = [[name, s.count, s.median, s.p99, s.minimum, s.maximum]
            for name, s in summaries.items()]
    ratios = _ratios(p50)
    targets = _targets(summaries, facts)
    md = ["# Latency suite\n", f"Host: {describe(machine)}\n",
          "All figures in ms unless stated.\n",
          _stats.markdown_table(["Measurement", "n", "p50", "p99", "min", "max"], rows),
          "\n## Ratios (baseline p50 / ptc p50; > 1 means ptc is faster)\n",
          _stats.markdown_table(["Baseline", "ptc", "Ratio"], ratios)]
    fall = facts.get("waterfall")
    if fall:
        steps = [[label, value] for label, value in fall["steps_ms"].items()]
        steps.append(["teardown (after the run returned, off the critical path)",
                      fall["teardown_after_return_ms"]])
        md += [f"\n## Waterfall of `run_code(\"1\")`, 50 ms apart (median ms of {fall['runs']} "
               "runs)\n",
               _stats.markdown_table(["Step", "ms"], steps),
               f"\nRuns whose SDK module travelled in `start` (not pre-loaded): "
               f"{fall['runs_with_the_sdk_module_in_start']} of {fall['runs']}.\n"]
    cpu = facts.get("cpu_ms_per_back_to_back_run")
    if cpu:
        faults = facts.get("minor_faults_per_back_to_back_run", {})
        rows = [[k, v, faults.get(k, "-")] for k, v in cpu.items()]
        floor = facts.get("floor_per_run")
        if floor:
            ours = sum(cpu.get(k, 0.0) for k in ("host", "zygote", "children"))
            least = floor["child_cpu_ms"] + floor["parent_cpu_ms"]
            rows += [["floor: the bare fork's child", floor["child_cpu_ms"],
                      floor["child_minor_faults"]],
                     ["floor: the bare fork's parent", floor["parent_cpu_ms"], "-"],
                     [f"host, zygote and children vs the floor: {ours / least:.1f}x", "-", "-"]]
        md += ["\n## CPU per run, back to back (ms; the refill after the last run included)\n",
               _stats.markdown_table(["Who", "CPU ms per run", "minor page faults per run"],
                                     rows)]
    rounds = facts.get("event_loop_rounds_per_nested_call")
    if rounds is not None:
        md.append(f"\nEvent-loop rounds per nested call: {rounds:.2f}.\n")
    nested_cpu = facts.get("nested_cpu_us_per_call")
    if nested_cpu:
        md.append(f"\nCPU per nested call (the in-program timing run): host "
                  f"{nested_cpu['host']:,.0f} us (system {nested_cpu['host_system']:,.0f}), "
                  f"child {nested_cpu['child']:,.0f} us.\n")
    stalls = facts.get("stalls_ms")
    if stalls:
        md += ["\n## Worst event-loop stall, 200 tools (heartbeat: a task sleeping 1 ms)\n",
               _stats.markdown_table(["Operation", "worst stall ms",
                                      "longest full GC meanwhile ms (any thread)"],
                                     [[k, v, stalls.get("full_gc_ms", {}).get(k, "-")]
                                      for k, v in stalls.items() if not k.endswith("_ms")]),
               f"\n200 tools registered one by one: {stalls['register_one_by_one_ms']:,.1f} ms "
               f"to prepared; at once: {stalls['register_at_once_ms']:,.1f} ms.\n"]
    md += ["\n## Performance targets\n",
           _stats.markdown_table(["Target", "Measured", "Limit", "Verdict", "Note"], targets)]
    pss = facts.get("idle_pss_kib", [])
    if pss:
        md += ["\n## Idle processes below the host (PSS)\n",
               _stats.markdown_table(["pid", "depth", "PSS KiB", "cmd"],
                                     [[x["pid"], x["depth"], x["pss_kib"], x["cmd"]]
                                      for x in pss])]
    payload = {"summaries": {k: v.as_dict() for k, v in summaries.items()}, "samples_ms": samples,
               "facts": facts, "ratios": ratios, "targets": targets}
    return "\n".join(md), payload


def render_runs(payloads: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Several runs of the suite side by side: each target's figure per run and how many
    runs met it, the CPU per back-to-back run, and each run's host state."""
    count = len(payloads)
    header = ["Target", "Limit", *[f"run {i + 1}" for i in range(count)], "met in"]
    rows: list[list[object]] = []
    for index, target in enumerate(payloads[0]["targets"]):
        name, _, limit = target[:3]
        runs = [p["targets"][index] for p in payloads]
        met = sum(run[3] == "met" for run in runs)
        rows.append([name, limit, *[run[1] for run in runs], f"{met} of {count}"])
    cpu = [p["facts"].get("cpu_ms_per_back_to_back_run", {}) for p in payloads]
    ours = [sum(c.get(k, 0.0) for k in ("host", "zygote", "children")) for c in cpu]
    rows.append(["CPU per back-to-back run: host, zygote, children", "-",
                 *[f"{c:,.1f} ms" for c in ours], "-"])
    floors = [p["facts"].get("floor_per_run") for p in payloads]
    rows.append(["the same / the floor (a bare fork running 1, same run)", "<= 2x",
                 *[f"{o / (f['child_cpu_ms'] + f['parent_cpu_ms']):.1f}x" if f else "-"
                   for o, f in zip(ours, floors, strict=True)], "-"])
    rows.append(["CPU per back-to-back run: the whole machine (other tenants too)", "-",
                 *[f"{c.get('machine', 0.0):,.1f} ms" for c in cpu], "-"])
    faults = [p["facts"].get("minor_faults_per_back_to_back_run", {}) for p in payloads]
    rows.append(["page faults per back-to-back run: zygote, children", "-",
                 *[f"{sum(f.values()):,.0f}" if f else "-" for f in faults], "-"])
    hosts = [f"- run {i + 1}: {describe(p['machine'])}" for i, p in enumerate(payloads)]
    md = ["# Latency suite, every run\n",
          f"{count} runs, one after another. The host of each run:\n", "\n".join(hosts), "",
          _stats.markdown_table(header, rows)]
    payload = {"runs": [{"machine": p["machine"], "targets": p["targets"],
                         "cpu_ms_per_back_to_back_run": p["facts"].get(
                             "cpu_ms_per_back_to_back_run"),
                         "minor_faults_per_back_to_back_run": p["facts"].get(
                             "minor_faults_per_back_to_back_run")} for p in payloads]}
    return "\n".join(md), payload
