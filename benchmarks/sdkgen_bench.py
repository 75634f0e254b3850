"""SDK generation benchmark: cold/warm generation, warm-cache assembly, stub vs schema bytes.

Run: .venv/bin/python benchmarks/sdkgen_bench.py [--repeat N]
Writes benchmarks/results/sdkgen.json and prints a table. "Cold" runs in a fresh process
(so the first datamodel-code-generator call, ~1 s, is included and reported separately).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "sdkgen" / "fixtures" / "tools50.json"
RESULTS = ROOT / "benchmarks" / "results" / "sdkgen.json"

_COLD_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import sdkgen
from sdkgen.__main__ import load_specs
from sdkgen._typegen import build_fragment
import_ms = (time.perf_counter() - t0) * 1e3
specs = load_specs(json.load(open(sys.argv[1])))[: int(sys.argv[2])]
out = {"import_ms": import_ms}
if sys.argv[3] == "total":
    t = time.perf_counter()
    sdkgen.SdkGenerator().generate(specs)  # includes the process's first generator call
    out["cold_total_ms"] = (time.perf_counter() - t) * 1e3
else:
    t = time.perf_counter()
    build_fragment({"type": "object", "properties": {"a": {"type": "string"}}}, None, "W")
    out["first_dcg_call_ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    sdkgen.SdkGenerator().generate(specs)  # empty cache, generator already warmed up
    out["cold_cache_after_first_call_ms"] = (time.perf_counter() - t) * 1e3
print(json.dumps(out))
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cold(n_tools: int, repeat: int) -> dict[str, Any]:
    merged: dict[str, list[float]] = {}
    for _ in range(repeat):
        for mode in ("total", "split"):
            out = subprocess.run(
                [sys.executable, "-c", _COLD_CHILD, str(FIXTURE), str(n_tools), mode],
                cwd=ROOT, capture_output=True, text=True, check=True,
            )  # fmt: skip
            for key, value in json.loads(out.stdout).items():
                merged.setdefault(key, []).append(value)
    return {k: {"median": statistics.median(v), "runs": len(v)} for k, v in merged.items()}


def warm_assembly(specs: list[Any], samples: int) -> dict[str, float]:
    import sdkgen

    gen = sdkgen.SdkGenerator()
    gen.prepare(specs)
    gen.generate(specs)
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        gen.generate(specs)
        times.append((time.perf_counter() - t) * 1e3)
    return {"median_ms": statistics.median(times), "p99_ms": _pct(times, 0.99), "samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per cold case")
    parser.add_argument("--samples", type=int, default=200, help="warm assembly samples")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import sdkgen
    from sdkgen.__main__ import load_specs

    data = json.loads(FIXTURE.read_text())
    specs = load_specs(data)
    keys = ("name", "description", "input_schema", "output_schema")
    schema_bytes = len(json.dumps([{k: t.get(k) for k in keys} for t in data]).encode())
    sdk = sdkgen.generate(specs)
    results = {
        "cold_1_tool": cold(1, args.repeat),
        "cold_50_tools": cold(50, args.repeat),
        "warm_assembly_1_tool": warm_assembly(specs[:1], args.samples),
        "warm_assembly_50_tools": warm_assembly(specs, args.samples),
        "size_50_tools": {
            "stub_bytes": len(sdk.stub.encode()),
            "module_bytes": len(sdk.module.encode()),
            "schema_json_bytes": schema_bytes,
            "schema_json_compact_bytes": len(
                json.dumps(
                    [{k: t.get(k) for k in keys} for t in data], separators=(",", ":")
                ).encode()
            ),
        },
        "targets": {"warm_assembly_50_tools_ms": 5.0, "stub_bytes_le_schema_bytes": True},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")

    print(f"{'case':<62} {'value':>12}")
    for case in ("cold_1_tool", "cold_50_tools"):
        for key, value in results[case].items():
            print(f"{case + ' ' + key + ' (median)':<62} {value['median']:>10.1f}ms")
    for case in ("warm_assembly_1_tool", "warm_assembly_50_tools"):
        r = results[case]
        print(f"{case + ' median':<62} {r['median_ms']:>10.3f}ms")
        print(f"{case + ' p99':<62} {r['p99_ms']:>10.3f}ms")
    for key, value in results["size_50_tools"].items():
        print(f"{'size ' + key:<62} {value:>12}")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
