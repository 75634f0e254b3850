"""BFCL function definitions as ptc tools, for the catalog benchmarks.

Read from the checked-in sample (``tests/ptc/data/bfcl_sample.jsonl``: 300 definitions,
258 distinct names; provenance and licence beside it). Past 258 tools the catalog repeats
the definitions under renamed copies (``name_2``, ``name_3``...), as the measurements in
``reference/catalogs.md`` did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ptc
from ptc._calls._tools import compact_json_render
from ptc._code._catalog import ident_words

SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "ptc" / "data" / "bfcl_sample.jsonl"
# Stop words of the query protocol (NLTK's English list, plus "e", "g", "etc", "via").
STOPWORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will just
    don should now also may might must would could shall e g etc ie via""".split()
)


def functions() -> list[dict[str, Any]]:
    """The distinct definitions (first of each name), in the sample's order."""
    seen: dict[str, dict[str, Any]] = {}
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip():
            function = json.loads(line)["function"]
            seen.setdefault(function["name"], function)
    return list(seen.values())


# An output schema with a local reference (as pydantic writes a model's fields), which
# sdkgen's fast path types since it follows references (before, only the type generator).
REFERENCING_OUTPUT = {
    "type": "object",
    "$defs": {"Count": {"type": "integer", "minimum": 0}},
    "properties": {"count": {"$ref": "#/$defs/Count"}},
}
# An output schema only the type generator types (a recursive model), for the cold start
# of tools whose shapes the fast path leaves to it.
RECURSIVE_OUTPUT = {
    "type": "object",
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["label"],
        }
    },
    "properties": {"root": {"$ref": "#/$defs/Node"}},
}


def definitions(
    count: int, *, simple_only: bool = False, output_schema: Any = None
) -> list[ptc.ToolDefinition]:
    """``count`` tools: the distinct definitions, then renamed copies of them (with
    ``simple_only``, only those sdkgen types without the type generator)."""
    from sdkgen._simple_types import simple_fragment

    pool = functions()
    out: list[ptc.ToolDefinition] = []
    round_ = 0
    while len(out) < count:
        round_ += 1
        for function in pool:
            if len(out) == count:
                break
            schema, _ = ptc.lenient_schema(function.get("parameters") or {"type": "object"})
            if simple_only and simple_fragment(schema, None, "P") is None:
                continue
            name = function["name"] if round_ == 1 else f"{function['name']}_{round_}"
            out.append(
                ptc.define_tool(
                    name=name,
                    description=function["description"],
                    input_schema=schema,
                    output=ptc.Output(output_schema or {}, compact_json_render),
                    execute=_unused,
                )
            )
    return out


def _unused(arguments: Any, context: Any) -> Any:
    return {"ok": True}


def content_words(function: dict[str, Any]) -> list[str]:
    """The content words of a tool's own description, in order, once each: not stop words,
    not digits, at least 3 letters, not a word of its name. BFCL's multi-turn definitions
    open with their API's shared preamble and then say "Tool description: ..."; only the
    part after that marker is the tool's own."""
    own = function["description"].split("Tool description:", 1)[-1]
    name_words = set(ident_words(function["name"]))
    words: list[str] = []
    for word in (w.lower() for w in _words(own)):
        if word in STOPWORDS or len(word) < 3 or word.isdigit() or word in name_words:
            continue
        if word not in words:
            words.append(word)
    return words


def _words(text: str) -> list[str]:
    import re

    return re.findall(r"[A-Za-z0-9]+", text)
