"""Code mode at catalog scale (DESIGN section 13): what the model is sent, cold start,
tool changes, and search quality, on BFCL definitions.

``python -m benchmarks.catalog_bench [--sizes 10,50,200,1000,3000] [--skip-cold]``

- **tokens**: o200k tokens (``bpe-openai``, tables in the wheel: no download) of
  ``scope.model_tools(format="openai")`` as JSON, native vs code with inline discovery vs
  code with search discovery (nothing pinned), per catalog size; and the ``auto`` choice
  with its estimate.
- **cold start**: a fresh process with an empty SDK cache (``PTC_CACHE_DIR``): the runtime
  made, the tools registered, ``await scope.prepare()`` and ``model_tools()``; then a tool
  change (one tool hidden) until the new description is there. ``import ptc`` and
  defining the tools are reported apart, and so is the whole from the process's start
  (the parent's wall clock at launch to the child's when its description is there).
  Sets: the sample's first tools; the first that sdkgen types without the type generator
  (``simple``; since nested objects are typed that way too, the same first 10); the
  sample's first 10 with an output schema that refers to a definition (``referencing``:
  a ``$ref``, typed without the generator since the fast path follows references) and
  with one only the generator types (``recursive``: a model that contains itself), the
  cost of shapes the fast path leaves to it.
- **search quality**: for every distinct tool of the sample, a query of the first few
  content words of its own description (not words of its name; see ``_bfcl``) must find
  it in the top 5. ptc's ranking (SQLite FTS5 BM25) beside ``bm25s`` and ``rank-bm25`` when
  they are installed (the ``bench`` extra), with their import and index-build costs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from . import _bfcl, _stats

RESULT_NAME = "catalog"
SIZES = (10, 50, 200, 1000, 3000)


def _encoding() -> Any:
    import bpe_openai

    return bpe_openai.get_encoding("o200k_base")


_CHUNK_CHARS = 20_000


def _tokens(encoding: Any, value: Any) -> int:
    """The o200k tokens of ``value`` as compact JSON. ``bpe-openai`` refuses very long
    inputs, so the text is encoded in pieces cut after a ``\\n`` escape or a ``, `` (the
    pre-tokenizer splits there too, so the sum matches one encoding to within a few)."""
    text = json.dumps(value, ensure_ascii=False)
    total, start = 0, 0
    while start < len(text):
        end = min(start + _CHUNK_CHARS, len(text))
        if end < len(text):
            cut = max(text.rfind("\\n", start, end), text.rfind(", ", start, end))
            end = cut + 2 if cut > start else end
        total += len(encoding.encode(text[start:end]))
        start = end
    return total


# -- tokens -----------------------------------------------------------------------------------


async def _sizes_of(count: int, encoding: Any) -> dict[str, Any]:
    import ptc
    from ptc._code._catalog import estimate_tokens
    from ptc._code._prompt import run_code_description
    from worker.testing import FakeBackend

    definitions = _bfcl.definitions(count)
    async with ptc.ToolRuntime(backend=FakeBackend()) as runtime:
        with runtime.root.batch():
            for definition in definitions:
                runtime.register(definition)
        scopes = {}
        for label, mode, discovery in (
            ("native", "native", None),
            ("inline", "code", "inline"),
            ("search", "code", "search"),
            ("auto", "code", "auto"),
        ):
            scope = scopes[label] = runtime.scope(label)
            scope.present_as(mode, discovery=discovery)  # type: ignore[arg-type]
            await scope.prepare()
        out: dict[str, Any] = {"tools": count}
        for label, scope in scopes.items():
            out[label] = _tokens(encoding, scope.model_tools(format="openai"))
        out["auto_chose"] = "inline" if out["auto"] == out["inline"] else "search"
        text = run_code_description("", "python", runtime.limits, shown=1, total=1)
        out["auto_estimate"] = estimate_tokens(len(text), definitions)
    return out


def measure_tokens(sizes: Sequence[int]) -> list[dict[str, Any]]:
    encoding = _encoding()
    rows = []
    for count in sizes:
        _stats.progress(f"tokens: {count} tools")
        rows.append(anyio.run(_sizes_of, count, encoding))
    return rows


# -- cold start -------------------------------------------------------------------------------

_COLD = r"""
import json, sys, time
t0 = time.perf_counter()
import anyio, ptc
from worker.testing import FakeBackend
import_ms = (time.perf_counter() - t0) * 1e3
sys.path.insert(0, sys.argv[1])
from benchmarks import _bfcl
count, kind = int(sys.argv[2]), sys.argv[3]
t = time.perf_counter()
outputs = {"referencing": _bfcl.REFERENCING_OUTPUT, "recursive": _bfcl.RECURSIVE_OUTPUT}
definitions = _bfcl.definitions(count, simple_only=kind == "simple",
                                output_schema=outputs.get(kind))
define_ms = (time.perf_counter() - t) * 1e3

async def main():
    t = time.perf_counter()
    async with ptc.ToolRuntime(default_mode="code", backend=FakeBackend()) as runtime:
        with runtime.root.batch():
            for definition in definitions:
                runtime.register(definition)
        await runtime.root.prepare()
        (spec,) = runtime.root.model_tools(format="openai")
        prepared_ms = (time.perf_counter() - t) * 1e3
        ready_wall = time.time()
        scope = runtime.scope("changed")
        await scope.prepare()
        scope.model_tools(format="openai")
        t = time.perf_counter()
        scope.restrict(deny=[definitions[0].name])
        await scope.prepare()
        (changed,) = scope.model_tools(format="openai")
        change_ms = (time.perf_counter() - t) * 1e3
        assert changed["function"]["description"] != spec["function"]["description"] or count > 50
    print(json.dumps({"import_ms": import_ms, "define_ms": define_ms,
                      "prepared_ms": prepared_ms, "change_ms": change_ms, "ready_wall": ready_wall,
                      "discovery": "search" if "catalog.search" in spec["function"]["description"]
                      else "inline"}))

anyio.run(main)
"""


def measure_cold(repeat: int) -> list[dict[str, Any]]:
    root = Path(__file__).resolve().parent.parent
    rows = []
    cases = ((10, "sample"), (10, "simple"), (10, "referencing"), (10, "recursive"),
             (50, "sample"), (1000, "sample"))  # fmt: skip
    for count, kind in cases:
        samples: list[dict[str, Any]] = []
        for _ in range(repeat):
            _stats.progress(f"cold start: {count} tools ({kind})")
            with tempfile.TemporaryDirectory(prefix="ptc-bench-cache-") as cache:
                env = {**os.environ, "PTC_CACHE_DIR": cache}
                started = time.time()  # the child reports its wall clock when it is ready
                out = subprocess.run(
                    [sys.executable, "-c", _COLD, str(root), str(count), kind],
                    capture_output=True, text=True, check=True, env=env, cwd=root,
                )  # fmt: skip
            sample = json.loads(out.stdout.strip().splitlines()[-1])
            sample["total_ms"] = (sample.pop("ready_wall") - started) * 1e3
            samples.append(sample)
        row: dict[str, Any] = {"tools": count, "set": kind, "discovery": samples[0]["discovery"]}
        for key in ("import_ms", "define_ms", "prepared_ms", "total_ms", "change_ms"):
            row[key] = sorted(s[key] for s in samples)[len(samples) // 2]
        rows.append(row)
    return rows


# -- search quality ---------------------------------------------------------------------------


def _queries(functions: list[dict[str, Any]], words: int, seed: int | None) -> list[str]:
    queries = []
    for function in functions:
        content = _bfcl.content_words(function)
        if seed is not None:
            random.Random(f"{seed}:{function['name']}").shuffle(content)
        queries.append(" ".join(content[:words]))
    return queries


Ranker = Callable[[str], list[str]]


def _ptc_ranker(functions: list[dict[str, Any]]) -> tuple[Ranker, dict[str, float]]:
    import sdkgen
    from ptc._code._catalog import Catalog
    from ptc._code._sdks import tool_spec

    definitions = _bfcl.definitions(len(functions))
    bindings = sdkgen.SdkGenerator().generate(
        [tool_spec(d) for d in definitions], described=(), prelude=False
    ).tools
    started = time.perf_counter()
    catalog = Catalog(definitions, bindings)
    catalog.search("warm up", 1)  # builds the index
    build_ms = (time.perf_counter() - started) * 1e3
    return (lambda q: [h.name for h in catalog.search(q, 5)]), {"build_ms": build_ms}


def _documents(functions: list[dict[str, Any]]) -> list[str]:
    from ptc._code._catalog import ident_words

    docs = []
    for function in functions:
        props = (function.get("parameters") or {}).get("properties") or {}
        params = " ".join(w for key in props for w in ident_words(key))
        docs.append(f"{' '.join(ident_words(function['name']))} {function['description']} {params}")
    return docs


def _bm25s_ranker(functions: list[dict[str, Any]]) -> tuple[Ranker, dict[str, float]] | None:
    try:
        started = time.perf_counter()
        import bm25s
        import Stemmer
    except ImportError:
        return None
    import_ms = (time.perf_counter() - started) * 1e3
    stemmer = Stemmer.Stemmer("english")
    names = [f["name"] for f in functions]
    started = time.perf_counter()
    tokens = bm25s.tokenize(_documents(functions), stopwords="en", stemmer=stemmer,
                            show_progress=False)  # fmt: skip
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    build_ms = (time.perf_counter() - started) * 1e3

    def rank(query: str) -> list[str]:
        query_tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer,
                                      show_progress=False)  # fmt: skip
        if not query_tokens.vocab:
            return []
        found, _ = retriever.retrieve(query_tokens, k=5, show_progress=False)
        return [names[i] for i in found[0]]

    return rank, {"import_ms": import_ms, "build_ms": build_ms}


def _rank_bm25_ranker(functions: list[dict[str, Any]]) -> tuple[Ranker, dict[str, float]] | None:
    try:
        started = time.perf_counter()
        import numpy as np
        from rank_bm25 import BM25Okapi
    except ImportError:
        return None
    import_ms = (time.perf_counter() - started) * 1e3
    from ptc._code._catalog import ident_words

    names = [f["name"] for f in functions]

    def words(text: str) -> list[str]:
        return [w for w in ident_words(text) if w not in _bfcl.STOPWORDS]

    started = time.perf_counter()
    index = BM25Okapi([words(d) for d in _documents(functions)])
    build_ms = (time.perf_counter() - started) * 1e3

    def rank(query: str) -> list[str]:
        scores = index.get_scores(words(query))
        return [names[i] for i in np.argsort(-scores, kind="stable")[:5]]

    return rank, {"import_ms": import_ms, "build_ms": build_ms}


def measure_search() -> dict[str, Any]:
    functions = _bfcl.functions()
    names = [f["name"] for f in functions]
    rankers: dict[str, tuple[Ranker, dict[str, float]]] = {
        "ptc (SQLite FTS5)": _ptc_ranker(functions)
    }
    for label, make in (("bm25s + PyStemmer", _bm25s_ranker), ("rank-bm25", _rank_bm25_ranker)):
        made = make(functions)
        if made is not None:
            rankers[label] = made
    protocols = [(2, None), (3, None), (4, None), (3, 1), (3, 2)]
    rows = []
    for label, (rank, costs) in rankers.items():
        row: dict[str, Any] = {"ranker": label, **{k: round(v, 1) for k, v in costs.items()}}
        for words, seed in protocols:
            queries = _queries(functions, words, seed)
            hits = sum(1 for name, q in zip(names, queries, strict=True) if name in rank(q))
            key = f"top5_{words}w" + (f"_random{seed}" if seed is not None else "")
            row[key] = round(100 * hits / len(names), 1)
        rows.append(row)
    return {"tools": len(names), "rows": rows}


# -- report -----------------------------------------------------------------------------------


def render(result: dict[str, Any]) -> str:
    out = ["# Code mode at catalog scale (BFCL definitions)\n"]
    if result.get("tokens"):
        out.append("\n## What the model is sent (o200k tokens, openai format)\n\n")
        header = ["Tools", "Native", "Code, inline", "Code, search", "inline / native",
                  "auto chose", "auto estimate"]  # fmt: skip
        rows = [[r["tools"], r["native"], r["inline"], r["search"],
                 f"{r['inline'] / r['native']:.2f}", r["auto_chose"], r["auto_estimate"]]
                for r in result["tokens"]]  # fmt: skip
        out.append(_stats.markdown_table(header, rows))
    if result.get("cold"):
        out.append("\n## Cold start and tool changes (fresh process, empty cache; median)\n\n")
        header = ["Tools", "Set", "Discovery", "import ptc ms", "define ms",
                  "prepared ms", "from process start ms", "tool change ms"]  # fmt: skip
        rows = [[r["tools"], r["set"], r["discovery"], r["import_ms"], r["define_ms"],
                 r["prepared_ms"], r.get("total_ms", "-"), r["change_ms"]]
                for r in result["cold"]]  # fmt: skip
        out.append(_stats.markdown_table(header, rows))
    if result.get("search"):
        search = result["search"]
        out.append(f"\n## Search quality ({search['tools']} distinct tools; % found in top 5)\n\n")
        keys = [k for k in search["rows"][0] if k.startswith("top5")]
        header = ["Ranker", "import ms", "index ms", *keys]
        rows = [[r["ranker"], r.get("import_ms", 0.0), r["build_ms"], *[r[k] for k in keys]]
                for r in search["rows"]]  # fmt: skip
        out.append(_stats.markdown_table(header, rows))
    return "".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog_bench",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--repeat", type=int, default=3, help="cold-start runs per case")
    parser.add_argument("--skip-tokens", action="store_true")
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--skip-search", action="store_true")
    parser.add_argument("--out", type=Path, default=_stats.RESULTS_DIR)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    result: dict[str, Any] = {"machine": _stats.machine_facts(), "load_avg": os.getloadavg()}
    if not args.skip_search:
        result["search"] = measure_search()
    if not args.skip_tokens:
        result["tokens"] = measure_tokens(sizes)
    if not args.skip_cold:
        result["cold"] = measure_cold(max(1, args.repeat))
    result["load_avg_after"] = os.getloadavg()
    markdown = render(result)
    paths = _stats.write_results(RESULT_NAME, result, markdown, args.out)
    print(markdown)
    print(f"results: {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
