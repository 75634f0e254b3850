"""``python -m benchmarks``: the demo and the benchmark suites, from a source checkout.

``demo`` runs the native-vs-code task suite in quick mode (``--full``: the usual
repetitions) and writes beside, not over, the committed results, under
``benchmarks/results/demo/`` (``make demo``). ``suite`` and ``latency`` run one suite,
``all`` runs both (``make bench``); the arguments after the command go to the suite(s),
so ``python -m benchmarks suite --help`` shows the suite's own options. ``environments``
times ``run_code`` in each simulated reference environment (root only; not in ``all``);
``scale`` runs one program making 1,000 to 100,000 nested calls (minutes; not in ``all``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import _stats, environments, latency, native_vs_code, scale

SUITES = ("suite", "latency", "environments", "scale", "all")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0] if __doc__ else None
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="the example tools in native and code mode (make demo)")
    demo.add_argument("--full", action="store_true", help="more repetitions (slower)")
    helps = {
        "suite": "the native-vs-code task suite",
        "latency": "the latency suite",
        "environments": "run_code in each simulated reference environment (root)",
        "scale": "one program making 1,000 to 100,000 nested calls",
        "all": "both suites (make bench)",
    }
    for name in SUITES:
        # No -h of its own: everything after the command, --help included, is the suite's.
        sub.add_parser(name, help=helps[name], add_help=False)
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return _demo(full=args.full)
    return _suites(args.command, rest)


def _demo(*, full: bool) -> int:
    out = str(_stats.RESULTS_DIR / "demo")
    return native_vs_code.main(["--out", out] + ([] if full else ["--quick"]))


def _suites(command: str, rest: list[str]) -> int:
    status = 0
    if command in ("suite", "all"):
        status |= native_vs_code.main(rest)
    if command in ("latency", "all"):
        status |= latency.main(rest)
    if command == "environments":
        status |= environments.main(rest)
    if command == "scale":
        status |= scale.main(rest)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
