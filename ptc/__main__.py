"""``python -m ptc`` / ``ptc``: the call-tree viewer (``ptc tree LOG``).

The demo and the benchmark suites live in the source checkout: ``python -m benchmarks``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ptc", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    tree = sub.add_parser("tree", help="print the call tree of an EventLog JSONL file")
    tree.add_argument("log")

    args = parser.parse_args(argv)
    return _tree(args.log)


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


if __name__ == "__main__":
    raise SystemExit(main())
