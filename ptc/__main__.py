"""``python -m ptc`` / ``ptc``: run a program, serve over MCP, the demo, the benchmark suites and
the call-tree viewer."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import _cli_run, _cli_serve
from ._cli_common import Parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(prog="ptc", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _cli_run.add_parser(sub)
    _cli_serve.add_parser(sub)

    demo = sub.add_parser("demo", help="the example scope in native and code mode (make demo)")
    demo.add_argument("--full", action="store_true", help="more repetitions (slower)")

    bench = sub.add_parser("bench", help="run a benchmark suite")
    bench.add_argument("suite", choices=["suite", "latency", "all"])
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the suite")

    tree = sub.add_parser("tree", help="print the call tree of an EventLog JSONL file")
    tree.add_argument("log")

    args = parser.parse_args(argv)
    if args.command == "run":
        return _cli_run.main(args)
    if args.command == "serve":
        return _cli_serve.main(args)
    if args.command == "tree":
        return _tree(args.log)
    if args.command == "demo":
        return _demo(full=args.full)
    return _bench(args.suite, list(args.rest))


def _tree(path: str) -> int:
    from ._calltree import build_trees, read_records, render_trees

    try:
        records = read_records(path)
    except (OSError, ValueError) as exc:
        print(f"ptc tree: {exc}", file=sys.stderr)
        return 2
    text = render_trees(build_trees(records))
    print(text or "(no calls recorded)")
    return 0


def _bench_modules() -> tuple[object, object]:
    try:
        from benchmarks import latency, native_vs_code
    except ImportError as exc:  # benchmarks/ lives in the source tree, not the wheel
        raise SystemExit(
            f"ptc bench: the benchmarks package is not importable ({exc}); "
            "run from the source checkout (make demo / make bench)"
        ) from exc
    return native_vs_code, latency


def _bench(suite: str, rest: list[str]) -> int:
    native_vs_code, latency = _bench_modules()
    status = 0
    if suite in ("suite", "all"):
        status |= int(native_vs_code.main(rest))  # type: ignore[attr-defined]
    if suite in ("latency", "all"):
        status |= int(latency.main(rest))  # type: ignore[attr-defined]
    return status


def _demo(*, full: bool) -> int:
    native_vs_code, _ = _bench_modules()
    # The demo writes beside, not over, the committed benchmark results.
    from benchmarks import _stats

    out = str(_stats.RESULTS_DIR / "demo")
    argv = ["--out", out] + ([] if full else ["--quick"])
    return int(native_vs_code.main(argv))  # type: ignore[attr-defined]


if __name__ == "__main__":
    raise SystemExit(main())
