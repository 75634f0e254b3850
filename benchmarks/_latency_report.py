"""The latency suite's report: the sample table, ratios against baselines, section-8 targets."""

from __future__ import annotations

from typing import Any

from . import _stats
from ._latency_parts import CPU_PROGRAMS

WARM = "run_code constant, warm, 50 ms apart"
B2B = "run_code constant, back to back"
SUBPROCESS = "subprocess python -I -c (same program)"
SMOL = "smolagents LocalPythonExecutor constant"
IN_PROCESS = "in-process pipeline call (native scope)"
THOUSAND = "run_code with 1000 sequential nested calls"
KILL = "kill: returned after deadline"
CONCURRENT = "20 concurrent runs (batch wall)"


def _ratios(p50: dict[str, float]) -> list[tuple[str, str, str]]:
    pairs = [(SUBPROCESS, B2B), (SUBPROCESS, WARM), (SMOL, B2B),
             ("smolagents 1000 in-process calls", THOUSAND)]
    for label in CPU_PROGRAMS:
        for profile in ("python", "restricted"):
            ours = f"{label}: ptc {profile}"
            pairs += [(f"{label}: smolagents", ours), (f"{label}: in-process exec (no isolation)",
                                                       ours)]
    return [(a, b, f"{p50[a] / p50[b]:.3g}x") for a, b in pairs if a in p50 and b in p50]


def _targets(p: dict[str, _stats.Summary], facts: dict[str, Any]) -> list[list[object]]:
    rows: list[list[object]] = []

    def check(name: str, figure: float | None, limit: float, unit: str, *, at_least: bool = False,
              note: str = "") -> None:
        if figure is None:
            rows.append([name, "not measured", f"{'>=' if at_least else '<='} {limit:g} {unit}",
                         "-", note])
            return
        met = figure >= limit if at_least else figure <= limit
        bound = f"{'>=' if at_least else '<='} {limit:g} {unit}"
        rows.append([name, f"{figure:,.3f} {unit}", bound, "met" if met else "NOT met", note])

    def get(name: str, attr: str) -> float | None:
        return getattr(p[name], attr) if name in p else None

    check("warm constant p50 (50 ms apart)", get(WARM, "median"), 5, "ms")
    check("warm constant p99 (50 ms apart)", get(WARM, "p99"), 15, "ms")
    check("back-to-back constant p50", get(B2B, "median"), 10, "ms")
    ratio = (p[SUBPROCESS].median / p[B2B].median) if SUBPROCESS in p and B2B in p else None
    check("bare `python -I` p50 / back-to-back p50", ratio, 1.5, "x", at_least=True)
    nested = facts.get("nested_round_trip_us")
    check("nested call round trip", nested, 150, "us",
          note="mean from (1,000-call run - constant run) / 1,000")
    check("sequential nested calls/s", facts.get("nested_calls_per_second"), 5000, "/s",
          at_least=True)
    inproc = get(IN_PROCESS, "median")
    check("nested / in-process call", nested / (inproc * 1000) if nested and inproc else None,
          3, "x")
    check("kill: returned after deadline, p99", get(KILL, "p99"), 50, "ms",
          note="includes result reporting; an upper bound on tree-gone time")
    # The pooled children are the deepest processes; anything between them and the zygote
    # (depth 1) is per-child supervision (e.g. a keeper) and is reported beside them.
    procs = [p_ for p_ in facts.get("idle_pss_kib", []) if p_["pss_kib"] is not None]
    deepest = max((p_["depth"] for p_ in procs), default=0)
    pooled = [p_["pss_kib"] for p_ in procs if p_["depth"] == deepest and deepest >= 2]
    between = [p_["pss_kib"] for p_ in procs if 1 < p_["depth"] < deepest]
    check("idle pooled child PSS (max)", max(pooled) / 1024 if pooled else None, 5, "MiB",
          note=f"{len(pooled)} children at depth {deepest}; plus {len(between)} processes "
               f"between them and the zygote, max {max(between, default=0) / 1024:.1f} MiB")
    check("20 concurrent runs: failures", facts.get("concurrent_failures"), 0, "")
    check("trivial runs/s at 20 concurrent", facts.get("concurrent_runs_per_second"), 100, "/s",
          at_least=True)
    return rows


def render(samples: dict[str, list[float]], facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    summaries = {name: _stats.summarize(values) for name, values in samples.items()}
    p50 = {name: s.median for name, s in summaries.items()}
    rows = [[name, s.count, s.median, s.p99, s.minimum, s.maximum]
            for name, s in summaries.items()]
    ratios = _ratios(p50)
    targets = _targets(summaries, facts)
    md = ["# Latency suite\n", "All figures in ms unless stated.\n",
          _stats.markdown_table(["Measurement", "n", "p50", "p99", "min", "max"], rows),
          "\n## Ratios (baseline p50 / ptc p50; > 1 means ptc is faster)\n",
          _stats.markdown_table(["Baseline", "ptc", "Ratio"], ratios),
          "\n## Performance targets\n",
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
