"""A task done in steps, each building on the last: native, code without a session, and code
with a session (docs/code-mode.md, "Sessions").

The model works as models do when they explore: fetch, then look at what it got, then
answer. In native mode the steps are turns of tool calls; in code mode each step is one
``run_code`` call whose output the model reads before writing the next. Without a session
each program starts empty, so a later step fetches again what an earlier one had (or the
data would have to pass through the model's context); with a session it names what the
last step kept.
"""

from __future__ import annotations

import time
from typing import Any

from ._episodes import Episode, _json_bytes, _read, content_text
from ._tasks import TOP_N, Task, _customers_expected, _customers_native

NAME = "multi_step_top_customers"
PROMPT = (
    f"Step by step: fetch every APAC order, see how they spread over customers, then give "
    f"the id, name and tier of the {TOP_N} customers with the most orders."
)
_FETCH = """
pages = [tools.list_sales(region="APAC", page_size=500)]
while pages[-1]["next_page"]:
    pages.append(tools.list_sales(region="APAC", page=pages[-1]["next_page"], page_size=500))
rows = [r for page in pages for r in page["rows"]]
"""
_COUNT = f"""
counts = {{}}
for r in rows:
    counts[r["customer_id"]] = counts.get(r["customer_id"], 0) + 1
top = sorted(counts, key=lambda c: (-counts[c], c))[:{TOP_N}]
"""
_ANSWER = """
found = tools.get_customer.map([{"customer_id": c} for c in top])
return [[c["customer_id"], c["name"], c["tier"]] for c in found]
"""
_LOOK_ROWS = 'print(len(rows), "orders; first:", rows[0])'
_LOOK_TOP = 'print(len(counts), "customers; top:", [(c, counts[c]) for c in top])'

WITH_SESSION = (_FETCH + _LOOK_ROWS, _COUNT + _LOOK_TOP, _ANSWER)
"""Each step names what the last one kept."""
WITHOUT_SESSION = (
    _FETCH + _LOOK_ROWS,
    _FETCH + _COUNT + _LOOK_TOP,
    _FETCH + _COUNT + _ANSWER,
)
"""Each step starts empty: it fetches (and counts) again what an earlier step had."""

TASK = Task(
    name=NAME,
    kind="three steps, each building on the last",
    prompt=PROMPT,
    native=_customers_native,
    program=lambda _: WITH_SESSION[0],
    expected=_customers_expected,
)


async def run_steps(target: Any, programs: tuple[str, ...], mode: str, run: int,
                    specs: int) -> Episode:
    """One episode: each program a model turn that reads the last one's output."""
    context = specs + len(PROMPT.encode())
    all_turns = 0
    executed = 0
    started = time.perf_counter()
    run_code_ms = 0.0
    result = None
    for program in programs:
        all_turns += context  # this turn reads everything so far and writes the call
        context += _json_bytes({"name": "run_code", "arguments": {"code": program}})
        step_started = time.perf_counter()
        result = await target.call("run_code", {"code": program})
        run_code_ms += (time.perf_counter() - step_started) * 1000
        context += len(content_text(result).encode())
        executed += len(result.meta.get("dispatch_log", ()))
    assert result is not None
    answer = _read(result)
    wall_ms = (time.perf_counter() - started) * 1000
    all_turns += context  # the last turn reads the answer and writes it
    context += _json_bytes(answer)
    return Episode(task=NAME, mode=mode, answer=answer, correct=answer == TASK.expected(run),
                   model_turns=len(programs) + 1, context_bytes=context,
                   input_bytes_all_turns=all_turns, model_tool_calls=len(programs),
                   tool_calls_executed=executed, wall_ms=wall_ms, run_code_ms=run_code_ms)
