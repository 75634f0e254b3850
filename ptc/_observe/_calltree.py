"""Reading an event log back: records -> call trees -> text.

Pure functions over the JSONL records :class:`ptc.EventLog` writes, so a run can be
inspected (``python -m ptc tree LOG``) or replayed offline without the runtime.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Record = Mapping[str, Any]


@dataclass
class CallNode:
    """One call in a tree; ``children`` are the nested calls it made, in call-id order."""

    record: Record
    children: list[CallNode] = field(default_factory=list)

    @property
    def call_id(self) -> str:
        return str(self.record.get("call_id", ""))


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a JSONL event log; a line that is not a JSON object is an error."""
    records: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON: {exc}") from exc
            if not isinstance(obj, dict):
                raise ValueError(f"{path}:{number}: a record must be a JSON object")
            records.append(obj)
    return records


def build_trees(records: Iterable[Record]) -> list[CallNode]:
    """Call records (``event == "call"``) arranged by ``parent_call_id``; roots in log order."""
    nodes: dict[str, CallNode] = {}
    order: list[CallNode] = []
    for record in records:
        if record.get("event") != "call":
            continue
        node = CallNode(record)
        nodes[node.call_id] = node
        order.append(node)
    roots: list[CallNode] = []
    for node in order:
        parent = nodes.get(str(node.record.get("parent_call_id") or ""))
        (parent.children if parent is not None else roots).append(node)
    for node in order:
        node.children.sort(key=lambda child: _natural_key(child.call_id))
    return roots


def render_trees(roots: Iterable[CallNode]) -> str:
    """An indented text tree: one line per call with its decision, timing and result."""
    return "\n".join(_render(list(roots), prefix=None))


def _render(nodes: list[CallNode], prefix: str | None) -> Iterator[str]:
    # prefix None: top level, no branch drawn.
    for index, node in enumerate(nodes):
        last = index == len(nodes) - 1
        if prefix is None:
            yield _describe(node.record)
            child_prefix = ""
        else:
            yield prefix + ("└─ " if last else "├─ ") + _describe(node.record)
            child_prefix = prefix + ("   " if last else "│  ")
        yield from _render(node.children, child_prefix)


def _describe(record: Record) -> str:
    args = json.dumps(record.get("arguments"), separators=(",", ":"), ensure_ascii=False)
    if len(args) > 80:
        args = args[:77] + "..."
    status = record.get("error_code") if record.get("is_error") else "ok"
    decision = record.get("decision", "")
    duration = record.get("duration_ms")
    timing = f" {duration:.1f} ms" if isinstance(duration, int | float) else ""
    summary = _content_summary(record.get("content"))
    return (
        f"{record.get('call_id')} {record.get('tool')}({args}) "
        f"[{decision}] {status}{timing}{' -> ' + summary if summary else ''}"
    )


def _content_summary(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    text = " ".join(" ".join(texts).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _natural_key(call_id: str) -> tuple[Any, ...]:
    return tuple(int(part) if part.isdigit() else part for part in call_id.split(":"))
