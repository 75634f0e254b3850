"""Pre-flight (docs/code-mode.md): only what is certainly wrong fails before a worker starts:
syntax (``syntax``), unknown ``tools.X`` names or keywords (``preflight``, listing the valid
names), and restricted-profile compile rejections (``policy``)."""

from __future__ import annotations

import pytest

import sdkgen
from ptc._code._preflight import PreflightError, check_program
from tests.worker.test_child_runtime import run_child
from worker._child._program import run_program

SPECS = [
    sdkgen.ToolSpec(
        name="search_docs",
        description="Search.",
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"],
            "additionalProperties": False,
        },
        output_schema={"type": "array"},
    ),
    sdkgen.ToolSpec(
        name="read-doc",
        description="Read one doc.",
        input_schema={
            "type": "object",
            "properties": {"doc_id": {"type": "string"}, "from": {"type": "integer"}},
            "required": ["doc_id"],
            "additionalProperties": False,
        },
        output_schema={"type": "object"},
    ),
    # An open input (no `additionalProperties: false`): the host accepts other keys.
    sdkgen.ToolSpec(name="log", input_schema={"type": "object", "properties": {"m": {}}}),
]


@pytest.fixture(scope="module")
def sdk() -> sdkgen.Sdk:
    return sdkgen.generate(SPECS)


def check(code: str, sdk: sdkgen.Sdk, profile: str = "python") -> PreflightError | None:
    return check_program(code, sdk, profile)


@pytest.mark.parametrize(
    "code",
    [
        "return 1",
        "x = tools.search_docs(query='a')\nreturn x",
        "return tools.search_docs(query='a', limit=2)",
        "return tools.read_doc(doc_id='d', from_=3)",
        "return tools.search_docs.map([{'query': 'a'}, {'nope': 1}])",  # keys: run time
        "kw = {'query': 'a'}\nreturn tools.search_docs(**kw)",  # keys unknown until run time
        "return tools.log(m=1, anything_else=2)",  # an open input accepts other keys
        "def helper():\n    return tools.search_docs(query='q')\nreturn helper()",
        "return parallel(lambda: tools.search_docs(query='a'), lambda: tools.read_doc(doc_id='x'))",
        "",
        "# only a comment",
    ],
)
def test_valid_programs_pass(sdk: sdkgen.Sdk, code: str) -> None:
    assert check(code, sdk) is None


@pytest.mark.parametrize(
    ("code", "line", "column"),
    [
        ("x = (", 1, 5),
        ("x = 1\ny = 2 +\n", 2, 8),
        ("if True:\nreturn 1", 2, 1),
        ("x = 1\n\n\ndef f(:\n    pass", 4, 7),
    ],
)
def test_a_syntax_error_names_line_and_column(
    sdk: sdkgen.Sdk, code: str, line: int, column: int
) -> None:
    problem = check(code, sdk)
    assert problem is not None and problem.kind == "syntax"
    assert f"(line {line}, column {column})" in problem.detail


def test_a_syntax_error_shows_the_offending_line_with_a_caret(sdk: sdkgen.Sdk) -> None:
    problem = check("total = 1\nprint(total", sdk)
    assert problem is not None and problem.kind == "syntax"
    assert "\n    print(total\n" in problem.detail
    assert problem.detail.endswith("^")


def test_a_top_level_return_is_not_a_syntax_error(sdk: sdkgen.Sdk) -> None:
    assert check("if True:\n    return 1\nreturn 2", sdk) is None


def test_an_unknown_tool_lists_the_valid_names(sdk: sdkgen.Sdk) -> None:
    problem = check("x = 1\nreturn tools.search_doc(query='a')", sdk)
    assert problem is not None and problem.kind == "preflight"
    assert problem.detail.startswith("line 2: tools.search_doc does not exist")
    assert "did you mean 'search_docs'" in problem.detail
    assert problem.detail.endswith("valid names: tools.log, tools.read_doc, tools.search_docs")


@pytest.mark.parametrize(
    "code",
    [
        "return tools.nope.map([{}])",
        "f = tools.nope\nreturn 1",
        "return parallel(lambda: tools.nope())",
        "def later():\n    return tools.nope()\nreturn 1",  # certainly wrong even if never run
    ],
)
def test_unknown_tool_in_any_position_fails(sdk: sdkgen.Sdk, code: str) -> None:
    problem = check(code, sdk)
    assert problem is not None and problem.kind == "preflight"
    assert "tools.nope does not exist" in problem.detail


def test_an_original_name_that_needed_mapping_is_unknown_with_a_hint(sdk: sdkgen.Sdk) -> None:
    problem = check("return tools.read_dok(doc_id='x')", sdk)
    assert problem is not None and "did you mean 'read_doc'" in problem.detail


def test_an_unknown_keyword_lists_the_valid_parameters(sdk: sdkgen.Sdk) -> None:
    problem = check("return tools.search_docs(query='a', limt=3)", sdk)
    assert problem is not None and problem.kind == "preflight"
    assert "tools.search_docs() has no parameter 'limt'" in problem.detail
    assert "did you mean 'limit'" in problem.detail
    assert problem.detail.endswith("(parameters: query, limit=...)")


def test_an_original_property_name_that_is_a_keyword_must_use_the_mapped_ident(
    sdk: sdkgen.Sdk,
) -> None:
    problem = check("return tools.read_doc(doc_id='x', **{'from': 1})", sdk)
    assert problem is None  # ** keys are only known at run time
    problem = check("return tools.read_doc(doc_id='x', frm=1)", sdk)
    assert problem is not None and "valid parameters: doc_id, from_=..." in problem.detail


def test_positional_arguments_are_refused(sdk: sdkgen.Sdk) -> None:
    problem = check("return tools.search_docs('a')", sdk)
    assert problem is not None and problem.kind == "preflight"
    assert "keyword arguments only" in problem.detail


@pytest.mark.parametrize(
    "code",
    [
        "tools = {'x': 1}\nreturn tools.nope",
        "def f(tools):\n    return tools.nope()\nreturn 1",
        "for tools in [1]:\n    pass\nreturn tools.nope",
        "import json as tools\nreturn tools.nope",
    ],
)
def test_a_rebound_tools_name_makes_nothing_certain(sdk: sdkgen.Sdk, code: str) -> None:
    assert check(code, sdk) is None


def test_no_visible_tools_says_so(sdk: sdkgen.Sdk) -> None:
    problem = check("return tools.anything()", sdkgen.generate([]))
    assert problem is not None
    assert problem.detail.endswith("does not exist; no tools are visible")


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("_getattr_ = 1", "_getattr_"),
        ("return [].__dict__", "__dict__"),
        ("x = 1\ny = 2\nreturn ().__class__.__bases__", "Line 3"),
        ("exec('1')", "Exec calls"),
    ],
)
def test_the_restricted_profile_rejects_at_compile_time_as_policy(
    sdk: sdkgen.Sdk, code: str, fragment: str
) -> None:
    problem = check(code, sdk, "restricted")
    assert problem is not None and problem.kind == "policy"
    assert problem.detail.startswith("the restricted profile refuses this program: ")
    assert fragment in problem.detail
    if "__" not in code and "exec" not in code:
        assert check(code, sdk, "python") is None


def test_restricted_errors_report_program_line_numbers(sdk: sdkgen.Sdk) -> None:
    problem = check("a = 1\nb = 2\n__c__ = 3", sdk, "restricted")
    assert problem is not None and "Line 3:" in problem.detail


def test_syntax_comes_before_preflight_and_preflight_before_policy(sdk: sdkgen.Sdk) -> None:
    assert check("tools.nope(\n__x__ = 1", sdk, "restricted").kind == "syntax"  # type: ignore[union-attr]
    assert check("__x__ = tools.nope()", sdk, "restricted").kind == "preflight"  # type: ignore[union-attr]
    assert check("__x__ = tools.search_docs(query='a')", sdk, "restricted").kind == "policy"  # type: ignore[union-attr]


def test_a_restricted_program_that_uses_the_sdk_passes(sdk: sdkgen.Sdk) -> None:
    code = (
        "hits = tools.search_docs(query='a')\n"
        "counts = {}\nfor h in hits:\n    counts[h] = counts.get(h, 0) + 1\nreturn counts"
    )
    assert check(code, sdk, "restricted") is None


# Pre-flight and the child judge a program with the same functions (worker.parse_program,
# worker.compile_program): whatever fails here fails there identically, and vice versa.

SYNTAX_AND_POLICY = [
    ("yield 1", "python"),
    ("x = [1]\nyield from x", "python"),
    ("match x:\n    case 1:\n        pass", "restricted"),
    ("x = 1\nif x:\n    y = (yield x)", "python"),
    ("x = (", "python"),
    ("a = 1\nb = = 2", "python"),
    ("total = 1\nprint(total", "python"),
    ("for i in []:\n    pass\nbreak", "python"),
    ("a = 1\n_b = 2\nexec('x')", "restricted"),
]


@pytest.mark.parametrize(("code", "profile"), SYNTAX_AND_POLICY)
def test_pre_flight_fails_exactly_as_the_child_program_runner(
    sdk: sdkgen.Sdk, code: str, profile: str
) -> None:
    problem = check(code, sdk, profile)
    ran = run_program(code, profile=profile, names={}, result_bytes=1000)
    assert not ran.ok
    assert problem == PreflightError(kind=ran.kind, detail=ran.detail)  # type: ignore[arg-type]


@pytest.mark.parametrize("code", ["yield 1", "x = [1]\nyield from x"])
def test_top_level_yield_fails_alike_in_pre_flight_and_a_real_child(
    sdk: sdkgen.Sdk, code: str
) -> None:
    problem = check(code, sdk)
    assert problem is not None and problem.kind == "syntax"
    assert "outside function (line " in problem.detail
    done = run_child(code).done
    assert done == {"type": "done", "ok": False, "kind": "syntax", "detail": problem.detail}


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("return 1", 1),
        ("if True:\n    return 'early'\nreturn 'late'", "early"),
        ("def g():\n    yield 1\n    yield 2\nreturn list(g())", [1, 2]),
        ("def g():\n    yield from range(2)\nlist(g())", [0, 1]),
        ("import asyncio\nawait asyncio.sleep(0)\nreturn 'awaited'", "awaited"),
        ("from math import *\nfloor(2.5)", 2),
        (
            "from __future__ import annotations\nn = 1\ndef f():\n    global n\n    n += 1\nf()\nn",
            2,
        ),
    ],
)
def test_programs_pass_pre_flight_and_run_in_a_real_child(
    sdk: sdkgen.Sdk, code: str, value: object
) -> None:
    assert check(code, sdk) is None
    assert run_child(code).done == {"type": "done", "ok": True, "value": value}


# --- the model's first try: short messages that name the fix -----------------------------

FIRST_TRY_SPECS = [
    *SPECS,
    sdkgen.ToolSpec(name="web-search", input_schema={"type": "object", "properties": {
        "query": {"type": "string"}}, "required": ["query"]}),
    sdkgen.ToolSpec(name="fmp.income_statement", input_schema={"type": "object", "properties": {
        "symbol": {"type": "string"}, "period": {"type": "string"}}, "required": ["symbol"]}),
    # Open (no additionalProperties: false): any key reaches the host, so a near miss of
    # `unit` would be sent and silently ignored.
    sdkgen.ToolSpec(name="get_current_weather", input_schema={"type": "object", "properties": {
        "location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
        "start_date": {"type": "string"}}, "required": ["location"]}),
]  # fmt: skip


@pytest.fixture(scope="module")
def first_try() -> sdkgen.Sdk:
    return sdkgen.generate(FIRST_TRY_SPECS)


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        ("return tools.web-search(query='x')", "write tools.web_search(...)"),
        ("r = tools.web-search(query='x')\nreturn r", "Python reads `tools.web - search`"),
        ("return tools.fmp.income_statement(symbol='A')", "write tools.fmp_income_statement"),
        ("return tools.get_current_weather(location='Oslo', units='celsius')",
         "has no parameter 'units': did you mean 'unit'?"),
        ("return tools.get_current_weather(location='Oslo', startDate='x')",
         "did you mean 'start_date'?"),
        ("return tools.get_current_weather('Oslo', 'celsius')",
         "keyword arguments only: write tools.get_current_weather(location='Oslo', "
         "unit='celsius')"),
        ("return tools.get_current_weather(unit='celsius')",
         "missing required keyword(s) location"),
        ("from tools import web_search\nreturn web_search(query='x')",
         "`tools` is not a module: it is predefined"),
        ("import tools\nreturn 1", "`tools` is not a module"),
        ("from catalog import search\nreturn 1", "`catalog` is not a module"),
        ("return get_current_weather(location='Oslo')",
         "get_current_weather is not defined: tools are called through `tools`: write "
         "tools.get_current_weather(...)"),
        ("return functions.web_search(query='x')", "write tools.web_search(...)"),
        ("return default_api.get_current_weather(location='x')",
         "write tools.get_current_weather(...)"),
        ("return tools.call('web-serch', query='x')",
         "tools.call('web-serch'): no visible tool has this name"),
    ],
)
def test_a_first_try_mistake_fails_with_the_fix_in_one_line(
    first_try: sdkgen.Sdk, code: str, fix: str
) -> None:
    problem = check(code, first_try)
    assert problem is not None and problem.kind == "preflight", code
    assert fix in problem.detail
    assert "\n" not in problem.detail


@pytest.mark.parametrize(
    "code",
    [
        "return tools.call('web-search', query='x')",
        "return tools.call('web_search', query='x')",
        "name = 'web-search'\nreturn tools.call(name, query='x')",
        "return tools.get_current_weather(location='Oslo', unit='celsius', trace='t')",
        "def get_current_weather(location):\n    return 1\nreturn get_current_weather('x')",
        "functions = {'a': len}\nreturn functions.get('a')",
        "return catalog.search('weather', limit=3)",
    ],
)
def test_what_may_be_right_passes(first_try: sdkgen.Sdk, code: str) -> None:
    assert check(code, first_try) is None


def many_tools(count: int) -> sdkgen.Sdk:
    return sdkgen.generate([sdkgen.ToolSpec(name=f"tool_{i:04}") for i in range(count)])


def test_an_unknown_name_among_many_lists_at_most_ten_then_points_at_search() -> None:
    problem = check("return tools.tool_00x()", many_tools(3000))
    assert problem is not None
    close = problem.detail.split("close: ", 1)[1].split(";", 1)[0].split(", ")
    assert 1 <= len(close) <= 10 and all(c.startswith("tools.tool_") for c in close)
    more = 3000 - len(close)
    assert problem.detail.endswith(f"; {more} more: use catalog.search('what it does')")
    assert len(problem.detail) < 400


def test_an_unknown_name_like_nothing_says_how_many_tools_there_are() -> None:
    problem = check("return tools.zzz()", many_tools(50))
    assert problem is not None
    assert problem.detail == (
        "line 1: tools.zzz does not exist; 50 tools: use catalog.search('what it does')"
    )
