"""Large catalogs (DESIGN section 13): discovery (inline, search, auto, pins),
``catalog.search`` / ``catalog.describe`` / ``tools.call`` in programs, ``scope.search_tools``
and ``scope.sdk(tools=...)`` on the host, and what host operations never do (run the
pipeline, show a hidden tool)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptc
import sdkgen
from ptc._calls._tools import NAME_PATTERN, compact_json_render
from ptc._code._catalog import Catalog, estimate_tokens, ident_words, summary
from ptc._code._sdks import tool_spec
from tests._typing import data
from worker import HOST_OPERATION_MARK, HOST_OPERATIONS
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio

BFCL_SAMPLE = Path(__file__).with_name("data") / "bfcl_sample.jsonl"


def tool(name: str, description: str, **properties: Any) -> ptc.ToolDefinition:
    async def execute(arguments: Any, context: ptc.ToolContext) -> Any:
        return {"tool": context.execution.name, **dict(arguments)}

    schema: dict[str, Any] = {
        "type": "object",
        "properties": {k: {"type": v} for k, v in properties.items()},
    }
    return ptc.define_tool(
        name=name,
        description=description,
        input_schema=schema,
        output=ptc.Output({}, compact_json_render),
        execute=execute,
    )


CATALOG = [
    tool("get-weather", "Current weather conditions and temperature for a city.", city="string"),
    tool("forecast.daily", "Daily forecast of rain and temperature for the next days.",
         city="string", days="integer"),
    tool("send_email", "Send an email message to a recipient.", to="string", body="string"),
    tool("list_invoices", "List the invoices of a customer account.", customer="string"),
    tool("convert_currency", "Convert an amount between currencies at today's rate.",
         amount="number", currency="string"),
]  # fmt: skip


def runtime(**options: Any) -> ptc.ToolRuntime:
    return ptc.ToolRuntime(
        default_mode="code",
        backend=FakeBackend(),
        containment=ptc.Containment(require=frozenset()),
        **options,
    )


@pytest.fixture
async def rt() -> AsyncIterator[ptc.ToolRuntime]:
    async with runtime() as rt:
        for definition in CATALOG:
            rt.register(definition)
        yield rt


def description(scope: ptc.Scope) -> str:
    specs = [spec for spec in data(scope.model_tools()) if spec["name"] == "run_code"]
    return str(specs[0]["description"])


def value(result: ptc.ToolResult) -> Any:
    assert not result.is_error, result.content
    assert isinstance(result.value, dict)
    return result.value["result"]


# --- discovery -----------------------------------------------------------------------------


async def test_auto_inlines_a_small_catalog(rt: ptc.ToolRuntime) -> None:
    text = description(rt.root)
    assert "def get_weather(*, city: str = ...)" in text
    assert "def list_invoices(" in text and "catalog.search" not in text


async def test_search_shows_the_pins_and_counts_the_rest(rt: ptc.ToolRuntime) -> None:
    scope = rt.scope("agent")
    scope.present_as("code", discovery="search", pin=["send_email", "not-there"])
    await scope.prepare()
    text = description(scope)
    assert "def send_email(" in text
    assert "def get_weather(" not in text and "def list_invoices(" not in text
    assert "5 tools, 1 shown below" in text and "catalog.search(" in text


async def test_auto_searches_past_inline_tokens(rt: ptc.ToolRuntime) -> None:
    scope = rt.scope("agent")
    scope.present_as("code", inline_tokens=10)
    assert "def get_weather(" not in description(scope) and "5 tools." in description(scope)
    wide = rt.scope("wide")
    wide.present_as("code", discovery="inline", inline_tokens=10)
    assert "def get_weather(" in description(wide)


async def test_discovery_options_are_inherited_nearest_first(rt: ptc.ToolRuntime) -> None:
    parent = rt.scope("parent")
    parent.present_as("code", discovery="search", pin=["send_email"])
    child = parent.scope("child")
    child.present_as("code", pin=["list_invoices"])
    assert child.discovery() == ptc.Discovery(mode="search", pin=("list_invoices",))
    assert "def list_invoices(" in description(child)
    assert "def send_email(" not in description(child)


@pytest.mark.parametrize(
    "options",
    [{"discovery": "lazy"}, {"inline_tokens": -1}, {"inline_tokens": 1.5}, {"pin": "send_email"}],
)
async def test_bad_discovery_options_are_refused(rt: ptc.ToolRuntime, options: Any) -> None:
    with pytest.raises((ptc.ConfigurationError, ptc.UsageError)):
        rt.scope("x").present_as("code", **options)


async def test_every_tool_stays_callable_in_search_mode(rt: ptc.ToolRuntime) -> None:
    scope = rt.scope("agent")
    scope.present_as("code", discovery="search")
    result = await scope.run_code(
        "a = tools.get_weather(city='Oslo')\n"
        "b = tools.forecast_daily(city='Rome', days=2)\n"
        "return [a['tool'], b['tool']]"
    )
    assert value(result) == ["get-weather", "forecast.daily"]


async def test_preflight_accepts_any_visible_tool_described_or_not(rt: ptc.ToolRuntime) -> None:
    scope = rt.scope("agent")
    scope.present_as("code", discovery="search")
    result = await scope.run_code("return tools.list_invoicez(customer='c')")
    assert result.error is not None and "close: tools.list_invoices" not in result.error.message
    assert "did you mean 'list_invoices'" in result.error.message


# --- in programs ---------------------------------------------------------------------------


async def test_catalog_search_ranks_by_description_words(rt: ptc.ToolRuntime) -> None:
    result = await rt.root.run_code("return catalog.search('rain forecast', limit=2)")
    hits = value(result)
    assert hits[0] == {
        "name": "forecast.daily",
        "ident": "forecast_daily",
        "summary": "Daily forecast of rain and temperature for the next days.",
    }
    assert len(hits) <= 2


async def test_catalog_search_matches_identifier_parts_and_parameters(rt: ptc.ToolRuntime) -> None:
    hits = value(await rt.root.run_code("return catalog.search('invoices')"))
    assert hits[0]["name"] == "list_invoices"
    hits = value(await rt.root.run_code("return catalog.search('amount')"))
    assert hits[0]["name"] == "convert_currency"


async def test_catalog_describe_gives_the_typed_stub(rt: ptc.ToolRuntime) -> None:
    text = value(await rt.root.run_code("return catalog.describe('get_weather', 'send_email')"))
    assert "def get_weather(*, city: str = ...) -> JSON:" in text
    assert "Send an email message to a recipient." in text
    assert "def list_invoices(" not in text and "from typing" not in text


async def test_catalog_describe_of_an_unknown_tool_raises_with_close_names(
    rt: ptc.ToolRuntime,
) -> None:
    code = (
        "try:\n    catalog.describe('get_wether')\nexcept ToolCallError as e:\n"
        "    return [e.tool, e.code, e.message]"
    )
    tool_name, code_, message = value(await rt.root.run_code(code))
    assert (tool_name, code_) == ("catalog.describe", "UNKNOWN_TOOL")
    assert "close: get_weather" in message and "catalog.search" in message


async def test_tools_call_takes_the_original_name(rt: ptc.ToolRuntime) -> None:
    code = (
        "a = tools.call('get-weather', city='Oslo')\n"
        "b = tools.call('forecast_daily', city='Rome')\n"
        "c = parallel(lambda: tools.call('send_email', to='x', body='y'))\n"
        "return [a['tool'], b['tool'], c[0]['tool']]"
    )
    assert value(await rt.root.run_code(code)) == ["get-weather", "forecast.daily", "send_email"]


async def test_host_operations_never_pass_the_pipeline(rt: ptc.ToolRuntime) -> None:
    seen: list[str] = []

    async def record(execution: ptc.ToolExecution, nxt: Any) -> Any:
        seen.append(execution.name)
        return await nxt()

    rt.on("tools/pre-execute", record)
    result = await rt.root.run_code(
        "catalog.search('weather')\ncatalog.describe('send_email')\n"
        "return tools.get_weather(city='Oslo')['tool']"
    )
    assert value(result) == "get-weather"
    assert seen == ["run_code", "get-weather"]
    log: Any = result.meta["dispatch_log"]
    assert [e["name"] for e in log] == ["get-weather"]
    assert log[0]["sub_call_id"].endswith(":ptc:1")


async def test_host_operations_never_see_hidden_tools(rt: ptc.ToolRuntime) -> None:
    scope = rt.scope("agent")
    scope.restrict(deny=["send_email"])
    code = (
        "hits = [h['name'] for h in catalog.search('email message recipient')]\n"
        "try:\n    catalog.describe('send_email')\n    described = True\n"
        "except ToolCallError:\n    described = False\n"
        "return [hits, described]"
    )
    hits, described = value(await scope.run_code(code))
    assert "send_email" not in hits and described is False
    assert all(h["name"] != "send_email" for h in scope.search_tools("email"))


async def test_a_tool_hidden_mid_run_leaves_search_at_once(rt: ptc.ToolRuntime) -> None:
    scope = rt.scope("agent")
    disposers: list[ptc.Disposer] = []

    @scope.tool
    def hide() -> str:
        """Hide the weather tool."""
        disposers.append(scope.restrict(deny=["get-weather"]))
        return "ok"

    code = (
        "before = [h['name'] for h in catalog.search('weather temperature city')]\n"
        "tools.hide()\n"
        "after = [h['name'] for h in catalog.search('weather temperature city')]\n"
        "return ['get-weather' in before, 'get-weather' in after]"
    )
    assert value(await scope.run_code(code)) == [True, False]


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("catalog.search('')", "query must be a non-empty string"),
        ("catalog.search('x', limit=0)", "limit must be an int from 1 to 50"),
        ("catalog.describe()", "give tool identifiers"),
        ("catalog.describe(*['t'] * 51)", "at most 50 tools"),
        ("catalog.x = 1", "catalog is read-only"),
        ("parallel(lambda: catalog.search('x'))", "cannot be used inside a parallel() thunk"),
        ("n = 'nope'\ntools.call(n)", "find tools with catalog.search"),
    ],
)
async def test_bad_catalog_use_fails_in_the_program(
    rt: ptc.ToolRuntime, code: str, fragment: str
) -> None:
    result = await rt.root.run_code(code)
    assert result.error is not None and fragment in result.error.message


@pytest.mark.parametrize("profile", ["python", "restricted"])
async def test_catalog_works_in_both_profiles(profile: str) -> None:
    async with runtime(profile=profile) as rt:
        for definition in CATALOG:
            rt.register(definition)
        code = (
            "hits = catalog.search('email')\n"
            "stub = catalog.describe(hits[0]['ident'])\n"
            "return [hits[0]['name'], 'def send_email(' in stub]"
        )
        assert value(await rt.root.run_code(code)) == ["send_email", True]


@pytest.mark.parametrize("profile", ["python", "restricted"])
async def test_in_async_code_the_catalog_is_awaited_and_batched_like_a_call(profile: str) -> None:
    async with runtime(profile=profile) as rt:
        for definition in CATALOG:
            rt.register(definition)
        code = (
            "import asyncio\n"
            "hits, weather = await asyncio.gather(\n"
            "    catalog.search('email'), tools.call('get-weather', city='Oslo'))\n"
            "stub = await catalog.describe(hits[0]['ident'])\n"
            "return [hits[0]['name'], weather['tool'], 'def send_email(' in stub]"
        )
        result = await rt.root.run_code(code)
        assert value(result) == ["send_email", "get-weather", True]
        log: Any = result.meta["dispatch_log"]
        assert [(e["name"], e["sub_call_id"][-6:]) for e in log] == [("get-weather", ":ptc:1")]


# --- on the host ---------------------------------------------------------------------------


async def test_search_tools_is_the_same_ranking(rt: ptc.ToolRuntime) -> None:
    in_program = value(await rt.root.run_code("return catalog.search('temperature city', 3)"))
    assert rt.root.search_tools("temperature city", limit=3) == in_program


async def test_sdk_of_a_subset_is_valid_python_with_only_those_tools(rt: ptc.ToolRuntime) -> None:
    text = rt.root.sdk(tools=["get-weather"])
    compile(text, "<sdk>", "exec")
    assert "def get_weather(" in text and "def send_email(" not in text
    with pytest.raises(ptc.UsageError, match="'get-wether' \\(close: get-weather"):
        rt.root.sdk(tools=["get-wether"])


def _without_fts5(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sqlite3`` as a Python built without FTS5 answers (never seen on a current build)."""
    import sqlite3

    connect = sqlite3.connect

    class NoFts5(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if "USING fts5" in sql:
                raise sqlite3.OperationalError("no such module: fts5")
            return super().execute(sql, *args)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, factory=NoFts5, **k))


async def test_without_fts5_search_tools_raises_a_ptc_error(
    rt: ptc.ToolRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_fts5(monkeypatch)
    with pytest.raises(ptc.SearchUnavailable, match="needs SQLite's FTS5") as raised:
        rt.root.search_tools("weather")
    assert isinstance(raised.value, ptc.PtcError) and isinstance(raised.value, RuntimeError)


async def test_without_fts5_a_programs_search_is_a_failed_call(
    rt: ptc.ToolRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_fts5(monkeypatch)
    code = (
        "try:\n    catalog.search('weather')\n"
        "except ToolCallError as e:\n    return [e.code, 'FTS5' in e.message]"
    )
    assert value(await rt.root.run_code(code)) == ["TOOL_UNAVAILABLE", True]


@pytest.mark.parametrize("bad", [None, 3])
async def test_search_tools_checks_its_arguments(rt: ptc.ToolRuntime, bad: Any) -> None:
    with pytest.raises(ptc.UsageError):
        rt.root.search_tools(bad)
    with pytest.raises(ptc.UsageError):
        rt.root.search_tools("x", limit=0)


# --- the catalog itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("get_weatherV2", ["get", "weather", "v", "2"]),
        ("fmp.income_statement", ["fmp", "income", "statement"]),
        ("HTTPRequest-send", ["http", "request", "send"]),
        ("", []),
    ],
)
def test_identifier_words(name: str, words: list[str]) -> None:
    assert ident_words(name) == words


def test_a_summary_is_the_first_sentence_capped() -> None:
    assert summary("Get the weather. Then more.") == "Get the weather."
    assert summary("  multi\nline  text ") == "multi line text"
    assert len(summary("word " * 100)) == 160


SEARCHED = Catalog(CATALOG, sdkgen.generate([tool_spec(d) for d in CATALOG]).tools)


@settings(deadline=None)
@given(st.text(max_size=200))
def test_any_query_is_safe(query: str) -> None:
    hits = SEARCHED.search(query, 5)
    assert len(hits) <= 5 and all(h.name in SEARCHED.names for h in hits)


def test_the_estimate_grows_with_the_catalog_and_is_about_a_quarter_of_the_chars() -> None:
    one = estimate_tokens(400, CATALOG[:1])
    five = estimate_tokens(400, CATALOG)
    assert 100 < one < five
    text = json.dumps([d.description for d in CATALOG])
    assert five > len(text) // 4


def test_no_tool_name_can_be_a_host_operation() -> None:
    for name in HOST_OPERATIONS:
        assert HOST_OPERATION_MARK in name and not NAME_PATTERN.match(name)


def test_search_finds_a_bfcl_tool_from_three_words_of_its_description() -> None:
    """DESIGN section 13's bar, on the checked-in BFCL sample: a query made of the first
    three content words of a tool's own description (no stop words, no words of its name)
    finds it in the top 5 for at least 90% of tools (benchmarks/catalog_bench.py reports the
    figure beside other rankers)."""
    stop = set(
        "the and for with from that this which are its into given specified specific based "
        "using use used can will should may also such other than then them their there these "
        "those what when where who how all any each more most some only own same very about "
        "against between through during before after above below over under again further "
        "once here why both few nor not too just now does did doing have has had having been "
        "being was were you your our ours his her hers they him she".split()
    )
    functions: dict[str, dict[str, Any]] = {}
    for line in BFCL_SAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip():
            function = json.loads(line)["function"]
            functions.setdefault(function["name"], function)
    definitions = [
        ptc.define_tool(
            name=name,
            description=f["description"],
            input_schema=ptc.lenient_schema(f.get("parameters") or {})[0],
            output=ptc.Output({}, compact_json_render),
            execute=lambda a, c: None,
        )
        for name, f in functions.items()
    ]
    catalog = Catalog(definitions, sdkgen.generate([tool_spec(d) for d in definitions]).tools)
    found = 0
    for name, function in functions.items():
        own = function["description"].split("Tool description:", 1)[-1]
        words: list[str] = []
        for word in re.findall(r"[a-z0-9]+", own.lower()):
            if len(word) > 2 and not word.isdigit() and word not in stop and word not in words:
                if word not in ident_words(name):
                    words.append(word)
        found += name in [h.name for h in catalog.search(" ".join(words[:3]), 5)]
    assert found / len(functions) >= 0.9


async def test_both_mode_lists_the_tools_and_a_run_code_that_follows_discovery(
    rt: ptc.ToolRuntime,
) -> None:
    scope = rt.scope("both")
    scope.present_as("both", discovery="search")
    names = [spec["name"] for spec in data(scope.model_tools())]
    assert names[-1] == "run_code" and len(names) == len(CATALOG) + 1
    assert "5 tools." in description(scope)
