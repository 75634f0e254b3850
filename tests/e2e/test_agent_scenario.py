"""An example agent scenario: a scripted stand-in for a model (no network) solves one
multi-step task over the example tools, once in native mode (one tool round trip per turn)
and once in code mode (one ``run_code`` program on a real contained worker). Both must give
the answer computed directly from the data set.

The task: "Which EMEA customer has the highest total sales in USD? Give id, name, tier and
the total." It needs every page of EMEA sales, the exchange rate of each currency seen,
and one customer lookup.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import ptc
from ptc.examples import _data, build_runtime
from tests._typing import data

pytestmark = pytest.mark.anyio

QUESTION = (
    "Which EMEA customer has the highest total sales in USD? "
    "Answer with customer_id, name, tier and total_usd (2 decimals)."
)

CODE_MODE_PROGRAM = """\
rows, page = [], 1
while page is not None:
    batch = tools.list_sales(region='EMEA', page=page, page_size=100)
    rows.extend(batch['rows'])
    page = batch['next_page']
currencies = sorted({r['currency'] for r in rows})
rates = dict(zip(currencies, [
    r['usd_per_unit'] for r in tools.get_exchange_rate.map([{'currency': c} for c in currencies])
]))
totals = {}
for r in rows:
    usd = r['amount'] * rates[r['currency']]
    totals[r['customer_id']] = totals.get(r['customer_id'], 0.0) + usd
best = max(sorted(totals), key=lambda c: totals[c])
customer = tools.get_customer(customer_id=best)
print(f"{len(rows)} rows, {len(currencies)} currencies")
return {'customer_id': best, 'name': customer['name'], 'tier': customer['tier'],
        'total_usd': round(totals[best], 2)}
"""


@dataclass
class Turn:
    """What the model says in one turn: tool calls, or the final answer."""

    calls: list[ptc.ToolCall] = field(default_factory=list)
    answer: dict[str, Any] | None = None


class ScriptedNativeModel:
    """Plays the model in native mode: reads the transcript, asks for the next step."""

    def turn(self, messages: list[dict[str, Any]], tools: list[str]) -> Turn:
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        pages = [r for r in results if isinstance(r, dict) and "rows" in r]
        rates = {r["currency"]: r["usd_per_unit"] for r in results if "usd_per_unit" in r}
        customers = [r for r in results if isinstance(r, dict) and "tier" in r]
        if not pages or pages[-1]["next_page"] is not None:
            page = 1 if not pages else pages[-1]["next_page"]
            return self._call(tools, "list_sales", region="EMEA", page=page, page_size=100)
        rows = [row for p in pages for row in p["rows"]]
        currencies = sorted({row["currency"] for row in rows})
        if not rates:
            return Turn(
                calls=[self._check(tools, "get_exchange_rate", currency=c) for c in currencies]
            )
        totals: dict[str, float] = {}
        for row in rows:
            usd = row["amount"] * rates[row["currency"]]
            totals[row["customer_id"]] = totals.get(row["customer_id"], 0.0) + usd
        best = max(sorted(totals), key=lambda c: totals[c])
        if not customers:
            return self._call(tools, "get_customer", customer_id=best)
        (customer,) = customers
        return Turn(
            answer={
                "customer_id": best,
                "name": customer["name"],
                "tier": customer["tier"],
                "total_usd": round(totals[best], 2),
            }
        )

    def _call(self, tools: list[str], name: str, **arguments: Any) -> Turn:
        return Turn(calls=[self._check(tools, name, **arguments)])

    @staticmethod
    def _check(tools: list[str], name: str, **arguments: Any) -> ptc.ToolCall:
        assert name in tools, f"the model was not offered {name}"
        return ptc.ToolCall(name, arguments)


class ScriptedCodeModel:
    """Plays the model in code mode: writes one program, then reports its result."""

    def turn(self, messages: list[dict[str, Any]], tools: list[str]) -> Turn:
        assert tools == ["run_code"]
        replies = [m["content"] for m in messages if m["role"] == "tool"]
        if not replies:
            arguments = {"code": CODE_MODE_PROGRAM, "description": "top EMEA customer by USD"}
            return Turn(calls=[ptc.ToolCall("run_code", arguments)])
        printed, _, result = replies[-1].partition("\n")
        assert printed == "450 rows, 2 currencies"
        return Turn(answer=json.loads(result))


async def agent_loop(scope: ptc.Scope, model: Any, max_turns: int = 20) -> tuple[Any, int, int]:
    """Runs the conversation; returns (answer, model turns, tool calls made by the model)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    calls = 0
    for turns in range(1, max_turns + 1):
        offered = [spec["name"] for spec in scope.model_tools(format="anthropic")]
        turn = model.turn(messages, offered)
        if turn.answer is not None:
            return turn.answer, turns, calls
        calls += len(turn.calls)
        messages.append({"role": "assistant", "tool_calls": [c.name for c in turn.calls]})
        for result in await scope.call_many(turn.calls):
            assert not result.is_error, result.error
            (block,) = result.content
            messages.append({"role": "tool", "content": block["text"]})
    raise AssertionError("the model did not answer")


def expected_answer() -> dict[str, Any]:
    """The answer computed straight from the data set, without any tool."""
    rates: dict[str, float] = {}
    totals: dict[str, float] = {}
    for sale in _data.sales():
        if sale["region"] != "EMEA":
            continue
        currency = sale["currency"]
        rate = rates.setdefault(currency, _data.get_exchange_rate(currency)["usd_per_unit"])
        totals[sale["customer_id"]] = totals.get(sale["customer_id"], 0.0) + sale["amount"] * rate
    best = max(sorted(totals), key=lambda c: totals[c])
    customer = _data.get_customer(best)
    return {
        "customer_id": best,
        "name": customer["name"],
        "tier": customer["tier"],
        "total_usd": round(totals[best], 2),
    }


@pytest.fixture
async def runtime() -> AsyncIterator[ptc.ToolRuntime]:
    async with build_runtime() as rt:
        yield rt


@pytest.mark.needs_root
async def test_native_and_code_mode_reach_the_same_answer(runtime: ptc.ToolRuntime) -> None:
    native = runtime.scope("native-agent")
    native.present_as("native")
    coder = runtime.scope("code-agent")
    coder.present_as("code")
    results: list[ptc.ToolResult] = []
    runtime.on("tools/result", results.append)

    native_answer, native_turns, native_calls = await agent_loop(native, ScriptedNativeModel())
    native_results = len(results)
    code_answer, code_turns, code_calls = await agent_loop(coder, ScriptedCodeModel())

    assert native_answer == code_answer == expected_answer()
    # Native: 5 sales pages, one turn of 2 rates, one customer lookup, then the answer.
    assert (native_turns, native_calls) == (8, 8)
    # Code: one run_code, then the answer; the same 8 calls ran inside the program.
    assert (code_turns, code_calls) == (2, 1)
    nested = [r for r in results[native_results:] if r.name != "run_code"]
    assert [r.name for r in nested] == [r.name for r in results[:native_results]]
    (run,) = [r for r in results[native_results:] if r.name == "run_code"]
    assert len(data(run.meta)["dispatch_log"]) == 8
    assert all(e["is_error"] is False for e in data(run.meta)["dispatch_log"])


async def test_the_code_agent_cannot_call_native_tools_directly(runtime: ptc.ToolRuntime) -> None:
    coder = runtime.scope("code-agent")
    coder.present_as("code")
    result = await coder.call("list_sales", {"region": "EMEA"})
    assert result.error is not None and result.error.code == "UNKNOWN_TOOL"
    assert "run_code" in result.error.message
