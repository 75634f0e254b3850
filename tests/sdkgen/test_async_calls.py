"""Tool calls in async code: ``await``, ``asyncio.gather`` as one batch, sync code unchanged
(a plain ``def``, or an ``async def`` that never awaits); ``tools.call`` and ``catalog``
behave like any call there.

Programs run through the child's own runner (``run_program``, python profile) with the
generated worker module over a recording transport.
"""

from __future__ import annotations

import gc
import textwrap
from typing import Any

import pytest

import sdkgen
from worker._child._outcome import ProgramResult
from worker._child._program import run_program

from .fake_transport import FakeTransport, load_module

GET = sdkgen.ToolSpec(
    name="get-item",
    input_schema={
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
        "additionalProperties": False,
    },
)
PING = sdkgen.ToolSpec(name="ping", input_schema={"type": "object", "additionalProperties": False})


@pytest.fixture(scope="module")
def sdk() -> sdkgen.Sdk:
    return sdkgen.generate([GET, PING])


def answer(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
    if args.get("id") == 13 or args.get("idents") == ["nope"]:
        return False, ("UNKNOWN_TOOL" if "idents" in args else "TOOL_FAILED", "unlucky")
    if name == "catalog:search":
        return True, [{"name": "get-item", "ident": "get_item", "summary": args["query"]}]
    if name == "catalog:describe":
        return True, f"def {args['idents'][0]}(*, id: int) -> JSON: ..."
    return True, {"tool": name, **args}


def run(sdk: sdkgen.Sdk, code: str) -> tuple[ProgramResult, FakeTransport]:
    transport = FakeTransport(answer)
    ns = load_module(sdk, transport)
    names = {k: ns[k] for k in ("tools", "parallel", "catalog", "ToolCallError")}
    result = run_program(textwrap.dedent(code), profile="python", names=names, result_bytes=1 << 20)
    return result, transport


def batch_sizes(transport: FakeTransport) -> list[int]:
    return [len(batch) for batch in transport.batches]


@pytest.mark.parametrize(
    "code",
    [
        "r = await tools.get_item(id=1)\nr",
        "import asyncio\n"
        "async def main():\n    return await tools.get_item(id=1)\n"
        "asyncio.run(main())",
        "import asyncio\n"
        "async def main():\n"
        "    task = asyncio.create_task(tools.get_item(id=1))\n"
        "    return await task\n"
        "asyncio.run(main())",
        "import asyncio\nawait asyncio.wait_for(tools.get_item(id=1), timeout=5)",
    ],
)
def test_an_awaited_call_gives_the_tools_value(sdk: sdkgen.Sdk, code: str) -> None:
    result, transport = run(sdk, code)
    assert result.ok, result.detail
    assert result.value == {"tool": "get-item", "id": 1}
    assert transport.batches == [[("get-item", {"id": 1})]]


@pytest.mark.parametrize(
    "code",
    [
        "import asyncio\nawait asyncio.gather(tools.get_item(id=1), tools.get_item(id=2), "
        "tools.ping())",
        "import asyncio\n"
        "await asyncio.gather(*[tools.get_item(id=i) for i in (1, 2)], tools.ping())",
        "import asyncio\n"
        "async def main():\n"
        "    calls = (tools.get_item(id=i) for i in (1, 2))\n"
        "    return await asyncio.gather(*calls, tools.ping())\n"
        "asyncio.run(main())",
    ],
)
def test_gathered_calls_go_to_the_host_as_one_batch_in_order(sdk: sdkgen.Sdk, code: str) -> None:
    result, transport = run(sdk, code)
    assert result.ok, result.detail
    assert result.value == [
        {"tool": "get-item", "id": 1},
        {"tool": "get-item", "id": 2},
        {"tool": "ping"},
    ]
    assert batch_sizes(transport) == [3]


def test_calls_awaited_one_after_the_other_are_separate_batches(sdk: sdkgen.Sdk) -> None:
    result, transport = run(sdk, "a = await tools.get_item(id=1)\nb = await tools.ping()\n[a, b]")
    assert result.ok and batch_sizes(transport) == [1, 1]


def test_a_failed_call_in_a_gather_raises_the_first_error_in_submission_order(
    sdk: sdkgen.Sdk,
) -> None:
    code = """
    import asyncio
    try:
        await asyncio.gather(tools.get_item(id=1), tools.get_item(id=13), tools.get_item(id=2))
    except ToolCallError as e:
        caught = [e.tool, e.code, e.message]
    both = await asyncio.gather(tools.get_item(id=13), tools.ping(), return_exceptions=True)
    [caught, type(both[0]).__name__, both[1]]
    """
    result, transport = run(sdk, code)
    assert result.value == [
        ["get-item", "TOOL_FAILED", "unlucky"],
        "ToolCallError",
        {"tool": "ping"},
    ]
    assert batch_sizes(transport) == [3, 2]


@pytest.mark.parametrize(
    "code",
    [
        # a sync program: plain values, as always
        "[tools.get_item(id=1), tools.ping()]",
        # a plain function called from async code is sync code
        "def both():\n    return [tools.get_item(id=1), tools.ping()]\n"
        "async def main():\n    return both()\n"
        "import asyncio\nasyncio.run(main())",
        # .map and parallel are synchronous everywhere
        "async def main():\n    await asyncio.sleep(0)\n"
        "    return tools.get_item.map([{'id': 1}]) + parallel(lambda: tools.ping())\n"
        "import asyncio\nasyncio.run(main())",
        # an async def that never awaits is sync code in an async def (as models write it)
        "async def main():\n    return [tools.get_item(id=1), tools.call('ping')]\n"
        "import asyncio\nasyncio.run(main())",
        "async def one(i):\n    return tools.get_item(id=i)\n"
        "async def main():\n    return [await one(1), (await asyncio.gather(ping()))[0]]\n"
        "async def ping():\n    return tools.ping()\n"
        "import asyncio\nasyncio.run(main())",
    ],
)
def test_sync_code_gets_values_as_before(sdk: sdkgen.Sdk, code: str) -> None:
    result, _ = run(sdk, code)
    assert result.ok, result.detail
    assert result.value == [{"tool": "get-item", "id": 1}, {"tool": "ping"}]


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        (
            "async def main():\n    r = tools.ping()\n    await asyncio.sleep(0)\n"
            "    return r['x']",
            "write `await tools.ping(...)`",
        ),
        (
            "async def main():\n    await asyncio.sleep(0)\n    return len(tools.ping())",
            "write `await tools.ping(...)`",
        ),
        (
            "async def main():\n    async with asyncio.timeout(5):\n"
            "        return tools.get_item(id=1).get('id')",
            "write `(await tools.get_item(...)).get`",
        ),
        (
            "async def main():\n    await asyncio.sleep(0)\n"
            "    return tools.call('get-item', id=1)['id']",
            "write `await tools.call(...)`",
        ),
    ],
)
def test_an_unawaited_call_used_as_a_value_names_the_fix(
    sdk: sdkgen.Sdk, code: str, fix: str
) -> None:
    with pytest.warns(RuntimeWarning, match=r"was never awaited, so the call was not made"):
        result, transport = run(sdk, "import asyncio\n" + code + "\nasyncio.run(main())")
        gc.collect()  # the coroutine may sit in a cycle with the exception's traceback
    assert result.kind == "exception"
    last = result.detail.splitlines()[-1]
    assert last.endswith(fix) and "coroutine, not the call's result" in last
    assert transport.batches == []


def test_an_awaited_call_cannot_be_awaited_again(sdk: sdkgen.Sdk) -> None:
    result, _ = run(sdk, "c = tools.ping()\nawait c\nawait c")
    assert result.detail.endswith("RuntimeError: cannot reuse already awaited tools.ping(...)")


def test_a_call_driven_without_an_event_loop_is_made_at_once(sdk: sdkgen.Sdk) -> None:
    code = (
        "async def main():\n    return await tools.ping()\n"
        "c = main()\n"
        "try:\n    c.send(None)\nexcept StopIteration as stop:\n    return stop.value"
    )
    result, transport = run(sdk, code)
    assert result.value == {"tool": "ping"} and batch_sizes(transport) == [1]


def test_tools_call_and_the_catalog_are_awaited_like_calls_and_batched_with_them(
    sdk: sdkgen.Sdk,
) -> None:
    code = """
    import asyncio
    hits, item, stub = await asyncio.gather(
        catalog.search("item"), tools.call("get-item", id=1), catalog.describe("get_item")
    )
    [hits[0]["ident"], item, stub, await tools.call("ping")]
    """
    result, transport = run(sdk, code)
    assert result.ok, result.detail
    assert result.value == [
        "get_item",
        {"tool": "get-item", "id": 1},
        "def get_item(*, id: int) -> JSON: ...",
        {"tool": "ping"},
    ]
    assert transport.batches == [
        [
            ("catalog:search", {"query": "item", "limit": 10}),
            ("get-item", {"id": 1}),
            ("catalog:describe", {"idents": ["get_item"]}),
        ],
        [("ping", {})],
    ]


def test_a_failed_catalog_operation_in_async_code_names_the_operation(sdk: sdkgen.Sdk) -> None:
    code = """
    try:
        await catalog.describe("nope")
    except ToolCallError as e:
        caught = [e.tool, e.code]
    caught
    """
    result, _ = run(sdk, code)
    assert result.value == ["catalog.describe", "UNKNOWN_TOOL"]


def test_an_unawaited_catalog_search_used_as_a_value_names_the_fix(sdk: sdkgen.Sdk) -> None:
    code = "import asyncio\nhits = catalog.search('x')\nawait asyncio.sleep(0)\nhits[0]"
    with pytest.warns(RuntimeWarning, match=r"catalog.search\(...\) was never awaited"):
        result, transport = run(sdk, code)
        gc.collect()
    assert result.detail.splitlines()[-1] == (
        "TypeError: catalog.search(...) in async code is a coroutine, not the call's result: "
        "write `await catalog.search(...)`"
    )
    assert transport.batches == []


def test_an_unawaited_call_as_the_result_names_the_fix(sdk: sdkgen.Sdk) -> None:
    code = "async def main():\n    await asyncio.sleep(0)\n    return tools.ping()\n"
    result, transport = run(sdk, "import asyncio\n" + code + "asyncio.run(main())")
    gc.collect()  # closed: no "never awaited" warning on top of the failure (errors here)
    assert (result.kind, result.detail) == (
        "invalid-result",
        "the result must be a JSON value, not the coroutine tools.ping(...), never awaited: "
        "write `await tools.ping(...)`",
    )
    assert transport.batches == []
