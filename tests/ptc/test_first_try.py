"""Programs as models write them on the first try (DESIGN section 13).

Each program of the corpus either runs and gives the expected answer, or fails with a
first line that names the fix: what to write instead. The styles come from what models
are trained on: synchronous SDK calls, ``await`` and ``asyncio.gather`` (Anthropic's
programmatic tool calling teaches them), ``async def main`` + ``asyncio.run``, the tools'
original dashed and dotted names, positional arguments, typos, ``print`` without
``return``, ``import json``, ``from tools import x``, the namespaces of other runtimes.

A trailing ``asyncio.run(main())`` is the program's trailing expression, so ``main()``'s
return value is the result (DESIGN section 5). The ``await`` / ``gather`` cases run in
both profiles.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

import ptc
from ptc._calls._tools import compact_json_render
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio


WEATHER = {"Oslo": 4, "Rome": 19, "Lima": 22}


def tool(name: str, description: str, schema: dict[str, Any], fn: Any) -> ptc.ToolDefinition:
    async def execute(arguments: Any, context: ptc.ToolContext) -> Any:
        return fn(**dict(arguments))

    return ptc.define_tool(
        name=name,
        description=description,
        input_schema={"type": "object", **schema},
        output=ptc.Output({}, compact_json_render),
        execute=execute,
    )


def _weather(location: str, unit: str = "celsius", **_: Any) -> dict[str, Any]:
    celsius = WEATHER[location]
    value = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32)
    return {"location": location, "temperature": value, "unit": unit}


def _fail() -> Any:
    raise RuntimeError("the upstream service is down")


S = {"type": "string"}
TOOLS = [
    tool("get_current_weather", "Current weather for a location.",
         {"properties": {"location": S, "unit": {"enum": ["celsius", "fahrenheit"]}},
          "required": ["location"]}, _weather),
    tool("web-search", "Search the web.",
         {"properties": {"query": S}, "required": ["query"]},
         lambda query: [f"result for {query}"]),
    tool("fmp.income_statement", "Income statement of a company.",
         {"properties": {"symbol": S, "period": S}, "required": ["symbol"],
          "additionalProperties": False},
         lambda symbol, period="annual": {"symbol": symbol, "revenue": 100, "period": period}),
    tool("add", "Add two numbers.",
         {"properties": {"a": {"type": "number"}, "b": {"type": "number"}},
          "required": ["a", "b"], "additionalProperties": False}, lambda a, b: a + b),
    tool("flaky", "Always fails.", {"properties": {}, "additionalProperties": False}, _fail),
    tool("get_distance", "Distance between two points.",
         {"properties": {"a": {"type": "array", "items": {"type": "number"}},
                         "b": {"type": "array", "items": {"type": "number"}}},
          "required": ["a", "b"], "additionalProperties": False},
         lambda a, b: round(((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5, 3)),
    *[tool(f"lookup_{n}", f"Look up record {n} of the archive.",
           {"properties": {"key": S}, "required": ["key"], "additionalProperties": False},
           lambda key, n=n: {"n": n, "key": key}) for n in range(14)],
]  # fmt: skip


@dataclass(frozen=True)
class Case:
    """A program and either its answer (``result``, ``stdout``) or the fix its failure
    must name (``kind`` and a fragment of the message's first line)."""

    code: str
    result: Any = None
    stdout: str | None = ""
    """``None``: some output, whatever it is."""
    kind: str = ""
    fix: str = ""


RUNS: dict[str, Case] = {
    "plain call and return": Case(
        "w = tools.get_current_weather(location='Oslo')\nreturn w['temperature']", 4),
    "print without return": Case(
        "w = tools.get_current_weather(location='Rome')\nprint(w['temperature'])", stdout="19\n"),
    "import json and print it": Case(
        "import json\nw = tools.get_current_weather(location='Lima')\nprint(json.dumps(w))",
        stdout='{"location": "Lima", "temperature": 22, "unit": "celsius"}\n'),
    "trailing expression": Case("tools.add(a=1, b=2)", 3),
    "an enum argument": Case(
        "tools.get_current_weather(location='Rome', unit='fahrenheit')['temperature']", 66),
    "map over a list": Case(
        "ws = tools.get_current_weather.map([{'location': c} for c in ['Oslo', 'Rome']])\n"
        "return [w['temperature'] for w in ws]", [4, 19]),
    "parallel thunks": Case(
        "a, b = parallel(lambda: tools.add(a=1, b=1), lambda: tools.add(a=2, b=2))\n"
        "return a + b", 6),
    "call by the original name": Case(
        "return tools.call('web-search', query='x')", ["result for x"]),
    "dotted name through tools.call": Case(
        "return tools.call('fmp.income_statement', symbol='AAPL')['revenue']", 100),
    "the mapped identifiers": Case(
        "return [tools.web_search(query='q')[0], tools.fmp_income_statement(symbol='A')['symbol']]",
        ["result for q", "A"]),
    "catch a failed call": Case(
        "try:\n    tools.flaky()\nexcept ToolCallError as e:\n    return [e.tool, e.code]",
        ["flaky", "TOOL_ERROR"]),
    "loop and accumulate": Case(
        "total = 0\nfor city in ['Oslo', 'Rome', 'Lima']:\n"
        "    total += tools.get_current_weather(location=city)['temperature']\nreturn total", 45),
    "f-string report": Case(
        "w = tools.get_current_weather(location='Oslo')\n"
        "return f\"{w['location']}: {w['temperature']} {w['unit']}\"", "Oslo: 4 celsius"),
    "search, then call the best hit": Case(
        "hit = catalog.search('current weather location', limit=3)[0]\n"
        "return tools.call(hit['name'], location='Rome')['temperature']", 19),
    "describe before calling": Case(
        "print(catalog.describe('add'))", stdout=None),
    "an extra key on an open schema": Case(
        "return tools.get_current_weather(location='Oslo', trace_id='t1')['temperature']", 4),
    "keyword arguments from a dict": Case(
        "args = {'a': 2, 'b': 5}\nreturn tools.add(**args)", 7),
    "a helper function": Case(
        "def celsius(city):\n    return tools.get_current_weather(location=city)['temperature']\n"
        "return max(['Oslo', 'Rome', 'Lima'], key=celsius)", "Lima"),
    "stdlib helpers": Case(
        "from statistics import mean\nfrom collections import Counter\n"
        "temps = [tools.get_current_weather(location=c)['temperature'] for c in ['Oslo', 'Rome']]\n"
        "return [mean(temps), Counter(['a', 'b', 'a'])['a']]", [11.5, 2]),
    "tuples for arrays": Case("return tools.get_distance(a=(0, 0), b=(3, 4))", 5.0),
    "async def main and asyncio.run, synchronous calls": Case(
        "import asyncio\nasync def main():\n"
        "    return tools.add(a=20, b=22)\nasyncio.run(main())", 42),
}  # fmt: skip

FAILS: dict[str, Case] = {
    "a dashed name": Case(
        "return tools.web-search(query='x')", kind="preflight",
        fix="write tools.web_search(...) or tools.call('web-search', ...)"),
    "a dotted name": Case(
        "return tools.fmp.income_statement(symbol='AAPL')", kind="preflight",
        fix="write tools.fmp_income_statement(...)"),
    "positional arguments": Case(
        "return tools.get_current_weather('Oslo')", kind="preflight",
        fix="write tools.get_current_weather(location='Oslo')"),
    "a typo in a tool name": Case(
        "return tools.get_curent_weather(location='Oslo')", kind="preflight",
        fix="close: tools.get_current_weather"),
    "a near-miss keyword on an open schema": Case(
        "return tools.get_current_weather(location='Oslo', units='fahrenheit')",
        kind="preflight", fix="has no parameter 'units': did you mean 'unit'?"),
    "a typo in a keyword": Case(
        "return tools.add(a=1, bb=2)", kind="preflight", fix="has no parameter 'bb'"),
    "a missing keyword": Case(
        "return tools.add(a=1)", kind="preflight", fix="missing required keyword(s) b"),
    "from tools import": Case(
        "from tools import add\nreturn add(a=1, b=2)", kind="preflight",
        fix="`tools` is not a module: it is predefined; drop the import"),
    "a bare tool name": Case(
        "return add(a=1, b=2)", kind="preflight", fix="write tools.add(...)"),
    "OpenAI's functions namespace": Case(
        "return functions.add(a=1, b=2)", kind="preflight", fix="write tools.add(...)"),
    "Gemini's default_api namespace": Case(
        "return default_api.get_current_weather(location='Oslo')", kind="preflight",
        fix="write tools.get_current_weather(...)"),
    "an unknown name for tools.call": Case(
        "return tools.call('web_searc', query='x')", kind="preflight",
        fix="tools.call('web_searc'): no visible tool has this name; close: tools.web_search"),
    "an async main called without asyncio.run": Case(
        "async def main():\n    return tools.add(a=1, b=2)\nmain()", kind="invalid-result",
        fix="never awaited: write `await main(...)`, or `asyncio.run(main(...))`"),
    "an unawaited call inside a list in async code": Case(
        "import asyncio\nasync def main():\n"
        "    return [await tools.add(a=1, b=2), tools.add(a=3, b=4)]\nasyncio.run(main())",
        kind="invalid-result",
        fix="value[1] is the coroutine tools.add(...), never awaited: write "
            "`await tools.add(...)`"),
    "an unawaited call inside a dict at the top level": Case(
        "n = await tools.add(a=1, b=2)\nreturn {'n': n, 'w': tools.get_current_weather("
        "location='Oslo')}", kind="invalid-result",
        fix="value['w'] is the coroutine tools.get_current_weather(...), never awaited: write "
            "`await tools.get_current_weather(...)`"),
    "a set as the result": Case(
        "return {1, 2}", kind="invalid-result", fix="the result must be a JSON value"),
    "a result over the limit": Case(
        "return 'x' * 2_000_000", kind="invalid-result",
        fix="return a smaller value or print a summary"),
}  # fmt: skip

AWAITS: dict[str, Case] = {
    "await at the top level": Case(
        "w = await tools.get_current_weather(location='Oslo')\nreturn w['temperature']", 4),
    "gather two calls": Case(
        "import asyncio\na, b = await asyncio.gather(tools.add(a=1, b=2), tools.add(a=3, b=4))\n"
        "return [a, b]", [3, 7]),
    "gather a comprehension": Case(
        "import asyncio\nws = await asyncio.gather(*[tools.get_current_weather(location=c) "
        "for c in ['Oslo', 'Rome']])\nreturn [w['temperature'] for w in ws]", [4, 19]),
    "async def main with awaits and asyncio.run": Case(
        "import asyncio\nasync def main():\n"
        "    w = await tools.get_current_weather(location='Lima')\n"
        "    return w['temperature']\nasyncio.run(main())", 22),
    "async def main, gather inside, print": Case(
        "import asyncio\nasync def main():\n"
        "    rs = await asyncio.gather(tools.add(a=1, b=1), tools.add(a=2, b=2))\n"
        "    print(sum(rs))\nasyncio.run(main())", stdout="6\n"),
    "catalog.search and tools.call awaited": Case(
        "import asyncio\nasync def main():\n"
        "    hits = await catalog.search('current weather location', limit=3)\n"
        "    w = await tools.call(hits[0]['name'], location='Rome')\n"
        "    return w['temperature']\nasyncio.run(main())", 19),
    "a sync helper called from async code": Case(
        "import asyncio\ndef temp(city):\n"
        "    return tools.get_current_weather(location=city)['temperature']\n"
        "async def main():\n    await asyncio.sleep(0)\n    return temp('Lima')\n"
        "asyncio.run(main())", 22),
}  # fmt: skip


def test_the_corpus_is_large_enough() -> None:
    assert len(RUNS) + len(FAILS) + len(AWAITS) >= 30


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=["python", "restricted"])
async def any_profile(request: pytest.FixtureRequest) -> AsyncIterator[ptc.Scope]:
    async with ptc.ToolRuntime(
        default_mode="code",
        backend=FakeBackend(),
        containment=ptc.Containment(require=frozenset()),
        profile=request.param,
    ) as runtime:
        for definition in TOOLS:
            runtime.register(definition)
        yield runtime.root


@pytest.fixture(scope="module")
async def scope() -> AsyncIterator[ptc.Scope]:
    async with ptc.ToolRuntime(
        default_mode="code", backend=FakeBackend(), containment=ptc.Containment(require=frozenset())
    ) as runtime:
        for definition in TOOLS:
            runtime.register(definition)
        yield runtime.root


async def check(scope: ptc.Scope, case: Case) -> None:
    result = await scope.run_code(case.code)
    if case.kind:
        assert result.error is not None and result.error.code == "CODE_RUN_FAILED"
        first_line = result.error.message.split("\n", 1)[0]
        assert first_line.startswith(f"code run failed ({case.kind}): "), result.error.message
        assert case.fix in first_line, first_line
        return
    assert result.error is None, result.error
    assert isinstance(result.value, dict)
    assert result.value["result"] == case.result
    if case.stdout is not None:
        assert result.value["stdout"] == case.stdout
    else:
        assert str(result.value["stdout"]).strip()


@pytest.mark.parametrize("name", sorted(RUNS))
async def test_a_first_try_that_should_run_runs(scope: ptc.Scope, name: str) -> None:
    await check(scope, RUNS[name])


@pytest.mark.parametrize("name", sorted(FAILS))
async def test_a_first_try_that_cannot_run_names_the_fix(scope: ptc.Scope, name: str) -> None:
    await check(scope, FAILS[name])


@pytest.mark.parametrize("name", sorted(AWAITS))
async def test_await_and_gather_run_as_models_write_them(any_profile: ptc.Scope, name: str) -> None:
    await check(any_profile, AWAITS[name])
