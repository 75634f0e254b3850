"""Build ``bfcl_sample.jsonl`` from the BFCL data (see README.md beside this file)::

    pip download --no-deps bfcl-eval==2026.3.23
    unzip -q bfcl_eval-2026.3.23-py3-none-any.whl 'bfcl_eval/data/*'
    python -m tests.ptc.data.make_bfcl_sample bfcl_eval/data

Deterministic: records are ranked by the SHA-256 of their canonical JSON; the sample takes,
for every feature below, the first few records that have it, then the first records with
ground-truth calls from every source file, until it holds :data:`SIZE` definitions; each
keeps its calls that pass tuples or extra keys and :data:`CALLS` others.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..bfcl import SAMPLE, Record, load_data_set

SIZE = 300
PER_FEATURE = 4
CALLS = 6
"""Ground-truth calls kept per definition, besides those passing tuples or extra keys."""
STANDARD = {"string", "integer", "number", "boolean", "object", "array", "null"}


def features(record: Record) -> set[str]:
    """What makes a record interesting: each non-standard form it uses, and its calls."""
    found: set[str] = set()
    function = record.function
    for part in ("parameters", "response"):
        for node in _schemas(function.get(part)):
            kind = node.get("type")
            if isinstance(kind, str) and kind not in STANDARD:
                found.add(f"type:{kind}")
            if isinstance(node.get("items"), list):
                found.add(f"{part}:items-array")
            for key in ("optional", "additionalProperties", "enum", "default"):
                if key in node:
                    found.add(f"keyword:{key}")
    if "." in function["name"]:
        found.add("name:dotted")
    if "response" in function:
        found.add("has-response")
    for call in record.calls:
        kwargs = ast.literal_eval(call)
        found.add("call")
        if _has_tuple(kwargs):
            found.add("call:tuple")
        properties = (function.get("parameters") or {}).get("properties") or {}
        if any(key not in properties for key in kwargs):
            found.add("call:extra-keys")
    return found


def _schemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                for sub in value.values():
                    yield from _schemas(sub)
            elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
                yield from _schemas(value)
    elif isinstance(node, list):
        for item in node:
            yield from _schemas(item)


def _has_tuple(value: Any) -> bool:
    if isinstance(value, tuple):
        return True
    if isinstance(value, dict):
        return any(_has_tuple(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_tuple(v) for v in value)
    return False


def _rank(record: Record) -> str:
    return hashlib.sha256(json.dumps(record.function, sort_keys=True).encode()).hexdigest()


def select(records: list[Record]) -> list[Record]:
    ranked = sorted(records, key=_rank)
    chosen: dict[int, Record] = {}
    every = sorted(set().union(*(features(r) for r in ranked)))
    for feature in every:
        having = [r for r in ranked if feature in features(r)]
        for record in having[:PER_FEATURE]:
            chosen.setdefault(id(record), record)
    sources = sorted({r.source for r in ranked})
    while len(chosen) < SIZE:
        before = len(chosen)
        for source in sources:
            fresh = [r for r in ranked if r.source == source and id(r) not in chosen and r.calls]
            if fresh and len(chosen) < SIZE:
                chosen[id(fresh[0])] = fresh[0]
        if len(chosen) == before:
            break
    return [_fewer_calls(r) for r in sorted(chosen.values(), key=_rank)]


def _fewer_calls(record: Record) -> Record:
    properties = (record.function.get("parameters") or {}).get("properties") or {}

    def special(call: str) -> bool:
        kwargs = ast.literal_eval(call)
        return _has_tuple(kwargs) or any(key not in properties for key in kwargs)

    kept = [c for c in record.calls if special(c)]
    kept += [c for c in record.calls if not special(c)][:CALLS]
    return Record(record.source, record.function, [c for c in record.calls if c in kept])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    sample = select(load_data_set(Path(argv[0])))
    SAMPLE.write_text("".join(r.to_json() + "\n" for r in sample), encoding="utf-8")
    calls = sum(len(r.calls) for r in sample)
    print(f"wrote {len(sample)} definitions and {calls} ground-truth calls to {SAMPLE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
