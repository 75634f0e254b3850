"""The model-facing text of code mode: ``run_code``'s schemas and description, the SDK
header, and their byte stability (docs/code-mode.md, docs/sdk.md)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import jsonschema
import pytest

import ptc
from ptc._code._prompt import (
    ALLOWED_MODULES,
    RUN_CODE_INPUT_SCHEMA,
    RUN_CODE_OUTPUT_SCHEMA,
    profile_rules,
    run_code_description,
    sdk_header,
)
from tests._typing import data
from worker.testing import FakeBackend

pytestmark = pytest.mark.anyio


def register_tools(runtime: ptc.ToolRuntime) -> None:
    @runtime.tool(concurrency_safe=True)
    def search(query: str, limit: int = 10) -> list[str]:
        """Search the docs."""
        return [query] * limit

    @runtime.tool(name="get-weather.v2")
    def weather(city: str) -> dict[str, float]:
        """Weather for a city."""
        return {"celsius": 20.0}


@pytest.fixture
async def rt() -> AsyncIterator[ptc.ToolRuntime]:
    async with ptc.ToolRuntime(
        default_mode="code", backend=FakeBackend(), containment=ptc.Containment(require=frozenset())
    ) as runtime:
        register_tools(runtime)
        yield runtime


def test_the_input_schema_is_code_plus_an_optional_label() -> None:
    jsonschema.Draft202012Validator.check_schema(RUN_CODE_INPUT_SCHEMA)
    validator = jsonschema.Draft202012Validator(RUN_CODE_INPUT_SCHEMA)
    assert validator.is_valid({"code": "return 1"})
    assert validator.is_valid({"code": "return 1", "description": "returns one"})
    for bad in ({}, {"code": ""}, {"code": 1}, {"code": "x", "extra": True}, {"description": "x"}):
        assert not validator.is_valid(bad), bad


def test_the_output_schema_is_result_and_stdout() -> None:
    jsonschema.Draft202012Validator.check_schema(RUN_CODE_OUTPUT_SCHEMA)
    validator = jsonschema.Draft202012Validator(RUN_CODE_OUTPUT_SCHEMA)
    for result in (None, 1, "s", [1, {"a": None}], {"k": [True]}):
        assert validator.is_valid({"result": result, "stdout": ""})
    assert not validator.is_valid({"result": 1})
    assert not validator.is_valid({"result": 1, "stdout": "", "logs": []})


@pytest.mark.parametrize("profile", ["python", "restricted"])
def test_the_sdk_header_explains_calls_batches_errors_and_the_profile(profile: str) -> None:
    header = sdk_header(profile)
    assert "tools.<name>(arg=...)" in header
    assert ".map(" in header and "parallel(" in header
    assert "ToolCallError (.tool, .code, .message)" in header
    assert header.endswith(profile_rules(profile))


def test_the_restricted_rules_name_what_is_forbidden_and_allowed() -> None:
    rules = profile_rules("restricted")
    fragments = ("`match`", "dunder names", "`_private` attributes")
    for fragment in (*fragments, f"Importable modules: {ALLOWED_MODULES}"):
        assert fragment in rules
    with pytest.raises(KeyError):
        profile_rules("javascript")


@pytest.mark.parametrize("profile", ["python", "restricted"])
def test_the_description_and_the_sdk_header_state_the_async_rule(profile: str) -> None:
    text = describe(profile=profile)
    assert "Calls are synchronous (awaitable in code that awaits: at top level, or in " in text
    assert "`await asyncio.gather(tools.a(x=1), tools.b())`: one batch" in text
    assert "(awaitable in async code, like calls)" in describe(profile=profile, shown=0, total=9)
    assert "await asyncio.gather(tools.a(...), tools.b(...)) is one batch" in sdk_header(profile)
    assert "async/await" not in profile_rules(profile)  # both profiles run it


def test_the_python_rules_say_the_whole_stdlib_and_no_network_or_subprocess() -> None:
    rules = profile_rules("python")
    for fragment in ("whole standard library", "no network", "no subprocesses"):
        assert fragment in rules


def describe(stub: str = "class tools: ...\n", **options: object) -> str:
    limits = options.pop("limits", ptc.Limits())
    profile = options.pop("profile", "python")
    assert isinstance(limits, ptc.Limits) and isinstance(profile, str)
    shown = options.pop("shown", 3)
    total = options.pop("total", 3)
    assert isinstance(shown, int) and isinstance(total, int)
    return run_code_description(stub, profile, limits, shown=shown, total=total)


def test_the_description_states_the_limits_and_ends_with_the_stub() -> None:
    limits = ptc.Limits(wall_seconds=2.5, memory_mib=256, max_calls=7, result_bytes=4096)
    text = describe(limits=limits)
    assert "Limits: 2.5 s, 256 MiB, 7 calls; the result at most 4 KiB as JSON" in text
    assert "output shown up to 64 KiB" in text
    assert text.endswith("The tools (`JSON` is any JSON value):\nclass tools: ...\n")
    assert describe(limits=limits) == text


def test_the_description_says_how_names_map_and_shows_one_example() -> None:
    text = describe()
    assert "`web-search` -> `tools.web_search`" in text
    assert 'tools.call("web-search"' in text
    assert text.count("Example (a made-up tool):") == 1


@pytest.mark.parametrize("profile", ["python", "restricted"])
def test_nothing_in_the_description_is_said_twice(profile: str) -> None:
    text = describe(profile=profile)
    sentences = [s.strip() for s in text.replace("\n", " ").split(". ") if len(s.strip()) > 20]
    assert len(sentences) == len(set(sentences))
    assert "from typing import" not in text


def test_search_discovery_says_how_many_tools_and_how_to_find_them() -> None:
    text = describe(shown=2, total=1000)
    assert "1000 tools, 2 shown below. Find the others" in text and "catalog.search(" in text
    assert "catalog.describe(" in text
    inline = describe(shown=1000, total=1000)
    assert "catalog." not in inline
    nothing_pinned = describe("", shown=0, total=1000)
    assert "1000 tools. Find them" in nothing_pinned and "The tools" not in nothing_pinned


def test_the_description_differs_by_profile() -> None:
    python = describe("S", profile="python")
    restricted = describe("S", profile="restricted")
    assert python != restricted
    assert profile_rules("restricted") in restricted and profile_rules("python") in python


async def test_the_model_sees_run_code_with_the_scopes_tools(rt: ptc.ToolRuntime) -> None:
    (spec,) = data(rt.root.model_tools(format="anthropic"))
    assert spec["name"] == ptc.RUN_CODE
    assert spec["input_schema"] == RUN_CODE_INPUT_SCHEMA
    assert "def search(*, query: str, limit: int = ...)" in str(spec["description"])
    assert "def get_weather_v2(*, city: str)" in str(spec["description"])
    (openai,) = data(rt.root.model_tools(format="openai"))
    assert openai["function"]["parameters"] == RUN_CODE_INPUT_SCHEMA
    (mcp,) = data(rt.root.model_tools(format="mcp"))
    assert mcp["inputSchema"] == RUN_CODE_INPUT_SCHEMA


async def test_a_scopes_profile_and_limits_shape_its_description(rt: ptc.ToolRuntime) -> None:
    scope = rt.scope("strict")
    scope.present_as("code", profile="restricted", limits=ptc.Limits(wall_seconds=5))
    (spec,) = data(scope.model_tools())
    description = str(spec["description"])
    assert "Limits: 5 s," in description
    assert profile_rules("restricted") in description
    assert scope.sdk().startswith("# Typed SDK")
    assert profile_rules("restricted") in scope.sdk()
    assert profile_rules("python") in rt.root.sdk()


async def test_sdk_and_description_are_byte_stable_across_runtimes() -> None:
    digests = set()
    for _ in range(2):
        async with ptc.ToolRuntime(
            default_mode="code",
            backend=FakeBackend(),
            containment=ptc.Containment(require=frozenset()),
        ) as runtime:
            register_tools(runtime)
            (spec,) = data(runtime.root.model_tools())
            blob = (runtime.root.sdk() + "\0" + str(spec["description"])).encode()
            digests.add(hashlib.sha256(blob).hexdigest())
    assert len(digests) == 1


async def test_the_model_never_sees_callbacks_timeouts_or_output_schemas(
    rt: ptc.ToolRuntime,
) -> None:
    scope = rt.scope("both")
    scope.present_as("both")
    for spec in data(scope.model_tools(format="raw")):
        assert set(spec) == {"name", "description", "input_schema"}


def test_the_restricted_module_list_is_what_the_worker_allows() -> None:
    from worker._child._stdlib import ALLOWED_MODULES as WORKER_MODULES

    assert sorted(ALLOWED_MODULES.split()) == sorted(WORKER_MODULES)
