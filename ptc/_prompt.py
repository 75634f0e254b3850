"""The model-facing text of code mode: the ``run_code`` schema, its description, the SDK header.

Everything here is deterministic so the text is byte-stable for a given set of tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from worker import MAX_PROGRAM_BYTES, Limits

RUN_CODE = "run_code"

RUN_CODE_INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "minLength": 1,
            "description": (
                "The Python program, run as a module (a top-level `return` or a final "
                "expression gives the result)."
            ),
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
        "Language profile: python (full CPython 3 in a contained process: no network, no "
        "subprocesses, no files outside a private scratch directory that is deleted "
        "afterwards). `await` works too: in `async def` or at top level a call is awaitable "
        "(`r = await tools.x(...)`), and `await asyncio.gather(tools.a(...), tools.b(...))` "
        "sends the calls as one batch."
    ),
    "restricted": (
        "Language profile: restricted (RestrictedPython). Not allowed: `match`, dunder names "
        "(you may read `__name__`, `__class__`, `__doc__`, and define special methods such "
        "as `__init__`, `__eq__`, `__iter__` in a class), `_private` attributes of objects "
        "the program did not create, `eval`/`exec`, `vars`/`dir`/`globals`/`locals`, "
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
        "A failed or denied call raises ToolCallError (.tool, .code, .message).\n"
        + profile_rules(profile)
    )


def run_code_description(sdk_stub: str, profile: str, limits: Limits) -> str:
    """The description of ``run_code``: how to write a program, then the scope's SDK."""
    return (
        "Run a Python program that calls tools through a typed SDK, in a fresh contained "
        "process. Use it to chain several tool calls, loop, filter or aggregate results "
        "without sending intermediate data through the conversation.\n"
        "\n"
        "How to write the program:\n"
        "- The code runs as a module: a top-level `return value` ends the run with that value "
        "(otherwise the value of a final expression is returned).\n"
        "- Globals `tools`, `parallel` and `ToolCallError` are predefined; do not import them.\n"
        '- Tool calls are synchronous: `hits = tools.search(query="x")`. Keyword arguments '
        "only; optional ones may be left out.\n"
        '- Several calls at once: `tools.read.map([{"id": 1}, {"id": 2}])` or '
        "`parallel(lambda: tools.a(x=1), lambda: tools.b(y=2))`; results come back in order.\n"
        "- A failed or denied call raises `ToolCallError` with `.tool`, `.code`, `.message`; "
        "catch it to recover.\n"
        "- Arguments and the returned value must be JSON values (dict, list, str, int, float, "
        "bool, None). `print` output is shown to you along with the result.\n"
        f"- Limits: {limits.wall_seconds:g} s wall clock (including tool calls), "
        f"{limits.cpu_seconds:g} s CPU, {limits.memory_mib} MiB memory, "
        f"{limits.max_calls} tool calls, {limits.output_bytes} bytes of output shown, "
        f"{MAX_PROGRAM_BYTES // 1024} KiB of program source, {limits.scratch_mib} MiB of files "
        "in the working directory (they count as memory).\n"
        f"- {profile_rules(profile)}\n"
        "\n"
        "The SDK (Python stubs; bodies elided):\n"
        "\n" + sdk_stub
    )
