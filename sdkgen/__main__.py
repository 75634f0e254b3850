"""``python -m sdkgen FILE.json [--module] [--header TEXT]``: print the stub (or module).

FILE holds tool specs either in the MCP ``tools/list`` shape
(``{"tools": [{name, description, inputSchema, outputSchema}]}``) or as a plain list of
``{name, description, input_schema, output_schema}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._generator import generate
from ._types import ToolSpec


def load_specs(data: Any) -> list[ToolSpec]:
    """Tool specs from either accepted JSON shape."""
    items = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError('expected {"tools": [...]} or a list of tool specs')
    specs = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError(f"not a tool spec: {item!r:.80}")
        input_schema = item.get("inputSchema", item.get("input_schema")) or {"type": "object"}
        specs.append(
            ToolSpec(
                name=item["name"],
                description=item.get("description") or "",
                input_schema=input_schema,
                output_schema=item.get("outputSchema", item.get("output_schema")),
            )
        )
    return specs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sdkgen", description=__doc__)
    parser.add_argument("file", type=Path, help="JSON file of tool specs")
    parser.add_argument("--module", action="store_true", help="print the worker module")
    parser.add_argument("--header", default="", help="comment lines put at the stub's top")
    args = parser.parse_args(argv)
    try:
        specs = load_specs(json.loads(args.file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        print(f"sdkgen: {args.file}: {exc}", file=sys.stderr)
        return 2
    sdk = generate(specs, header=args.header)
    sys.stdout.write(sdk.module if args.module else sdk.stub)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
