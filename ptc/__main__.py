"""``python -m ptc`` / ``ptc``: run a program, serve over MCP and view a call tree.

``ptc run`` runs a model-written program under containment, ``ptc serve`` serves a scope
over MCP, ``ptc tree`` prints an ``EventLog``. The demo and the benchmark suites live in the
source checkout: ``python -m benchmarks``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ._cli import _run as run_command
from ._cli import _serve as serve_command
from ._cli._common import Parser, help_text


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(prog="ptc", description=help_text(__doc__))
    sub = parser.add_subparsers(dest="command", required=True)
    run_command.add_parser(sub)
    serve_command.add_parser(sub)

    tree = sub.add_parser("tree", help="print the call tree of an EventLog JSONL file")
    tree.add_argument("log")

    args = parser.parse_args(argv)
    if args.command == "run":
        return run_command.main(args)
    if args.command == "serve":
        return serve_command.main(args)
    return _tree(args.log)


def _tree(path: str) -> int:
    from ._observe._calltree import build_trees, read_records, render_trees

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
