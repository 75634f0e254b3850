"""The model-facing text of code mode: the ``run_code`` schema, its description, the SDK
header, and the content of its result (``render_run_code``).

Everything here is deterministic so the text is byte-stable for a given set of tools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from worker import MAX_PROGRAM_BYTES, Limits

from .._calls._tools import RUN_CODE as RUN_CODE  # re-exported: _discovery reads it here
from .._json import JSON
from .._results import ContentBlock

_NO_OUTPUT = f"({RUN_CODE} completed with no output)"

RUN_CODE_INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "minLength": 1,
            "description": "The Python program (module code, as the tool's description says).",
        },
        "description": {
            "type": "string",
            "description": "A short label (5-10 words) saying what the program does.",
        },
    },
    "required": ["code"],
    "additionalProperties": False,
}

RUN_CODE_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"result": {}, "stdout": {"type": "string"}},
    "required": ["result", "stdout"],
    "additionalProperties": False,
}

ALLOWED_MODULES = (
    "json re math statistics datetime collections itertools functools random string "
    "decimal fractions heapq bisect textwrap typing time base64 unicodedata queue stat sys "
    "asyncio copy dataclasses"
)

_PROFILE_RULES = {
    "python": (
        "Python 3 with the whole standard library (import what you need), in a contained "
        "process: no network, no subprocesses, files only in a scratch directory deleted "
        "afterwards."
    ),
    "restricted": (
        "Restricted Python (RestrictedPython). Not allowed: `match`, dunder names (you may "
        "read `__name__`, `__class__`, `__doc__`, and define special methods such as "
        "`__init__`, `__eq__`, `__iter__` in a class), `_private` attributes of objects the "
        "program did not create, `eval`/`exec`, `vars`/`dir`/`globals`/`locals`, "
        "`type(name, bases, dict)`, `str.format` (use f-strings or %). "
        f"Importable modules: {ALLOWED_MODULES} (their documented public API, without "
        "`functools.singledispatch`, `collections.UserString`, `string.Formatter`; "
        "`functools.wraps` copies only the name and docstring; `sys` is read-only; "
        "`asyncio` has `run`, `gather` and `sleep`). A policy error ends the run even if "
        "caught."
    ),
}


def profile_rules(profile: str) -> str:
    return _PROFILE_RULES[profile]


def sdk_header(profile: str) -> str:
    """The comment lines on top of ``scope.sdk()``: how to call the SDK and the profile rules."""
    return (
        "Typed SDK of the tools callable from run_code programs.\n"
        "Call tools synchronously: tools.<name>(arg=...). Batch: tools.<name>.map([{...}, ...]) "
        "or parallel(lambda: tools.a(...), lambda: tools.b(...)).\n"
        "In code that awaits, calls are awaitable: await asyncio.gather(tools.a(...), "
        "tools.b(...)) is one batch.\n"
        "A failed or denied call raises ToolCallError (.tool, .code, .message).\n"
        + profile_rules(profile)
    )


def run_code_description(
    stub: str, profile: str, limits: Limits, *, shown: int, total: int
) -> str:
    """The description of ``run_code``: how to write a program, then the stubs of the
    ``shown`` tools of ``total`` (all of them: inline discovery; else search)."""
    how = (
        "Run a Python program that calls tools; only what it prints and returns comes back "
        "to you. Use it to chain calls, loop, filter and aggregate without passing data "
        "through the conversation.\n"
        "- The code runs as a module: `return value` (or a final expression) is the "
        "result; print() output is shown too. Values are JSON (dict, list, str, int, float, "
        "bool, None).\n"
        "- Calls are synchronous (awaitable in code that awaits: at top level, or in an "
        "`async def` with `await`), keyword arguments only: "
        '`r = tools.get_weather(city="Oslo")`. '
        "A tool's name maps to its identifier with every character outside [A-Za-z0-9_] "
        'written `_` (`web-search` -> `tools.web_search`); `tools.call("web-search", q="x")` '
        "takes the name as it is.\n"
        '- Many calls at once: `tools.get_weather.map([{"city": "Oslo"}, {"city": "Rome"}])` '
        "or `parallel(lambda: tools.a(x=1), lambda: tools.b())` or, in async code, "
        "`await asyncio.gather(tools.a(x=1), tools.b())`: one batch, results in order.\n"
        "- A failed or denied call raises ToolCallError (.tool, .code, .message).\n"
        f"- {profile_rules(profile)}\n"
        f"- Limits: {limits.wall_seconds:g} s, {limits.memory_mib} MiB, {limits.max_calls} "
        f"calls; the result at most {_size(limits.result_bytes)} as JSON, output shown up to "
        f"{_size(limits.output_bytes)}; source up to {MAX_PROGRAM_BYTES // 1024} KiB.\n"
    )
    if shown < total:
        which = f"{total} tools, {shown} shown below. Find the others" if shown else (
            f"{total} tools. Find them"
        )
        how += (
            f"- {which} with "
            '`catalog.search("what you need", limit=10)` (-> [{"name", "ident", "summary"}]) '
            'and read their signatures with `print(catalog.describe("ident", ...))` (awaitable '
            "in async code, like calls); every tool is callable, described or not.\n"
        )
    example = (
        "Example (a made-up tool):\n"
        '    hits = tools.search_docs(query="refund policy", limit=3)\n'
        '    return [h["title"] for h in hits]\n'
    )
    if not shown:
        return how + example
    return how + example + "\nThe tools (`JSON` is any JSON value):\n" + stub


def _size(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def render_run_code(value: JSON, note: str = "") -> list[ContentBlock]:
    """The captured output, then the result (a string as is, else JSON indented 2), then
    ``note`` (lines the host adds: the run's session, a summarised dispatch log)."""
    parts: list[str] = []
    stdout = value.get("stdout", "") if isinstance(value, Mapping) else ""
    result = value.get("result") if isinstance(value, Mapping) else None
    if isinstance(stdout, str) and stdout:
        parts.append(stdout.rstrip("\n"))
    if result is not None:
        parts.append(result if isinstance(result, str) else json.dumps(result, indent=2))
    text = "\n".join(parts) or _NO_OUTPUT
    return [{"type": "text", "text": f"{text}\n{note}" if note else text}]
