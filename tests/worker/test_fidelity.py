"""The fidelity scoreboard: both profiles on peers' own test corpora, in real children.

The corpora (``tests/corpora/``: pydantic-monty's test cases and smolagents' executor
tests, kept where CPython 3.11 passes them) run through real contained children, many
cases per child (``tests/worker/fidelity.py``). The thresholds are DESIGN section 5's:

- ``python`` behaves as CPython on every case;
- ``restricted`` accepts at least 90% of the Monty success cases Monty accepts, at least
  95% of the smolagents cases smolagents accepts, and raises the right exception type on
  at least 90% of Monty's error cases.

Beyond the thresholds, the cases ``restricted`` fails are pinned, case by case, in
``fidelity_known_failures.json`` (id -> verdict): a case that starts failing fails the
test, and so does a known failure that now passes (remove it from the file).

What Monty and smolagents accept comes from ``benchmarks/results/fidelity.json`` (both are
benchmark dependencies; ``python -m benchmarks.fidelity`` measures them).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.worker.fidelity import (
    CORPORA,
    CORPORA_DIR,
    Case,
    Scoreboard,
    Verdict,
    load_corpus,
    run_ptc,
)
from worker import Containment
from worker._host._backend import SubprocessBackend

pytestmark = [pytest.mark.anyio, pytest.mark.needs_root]

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "fidelity.json"
CASES = {name: load_corpus(name) for name in CORPORA}
PEERS = json.loads(RESULTS.read_text(encoding="utf-8"))
KNOWN_FILE = Path(__file__).with_name("fidelity_known_failures.json")
KNOWN: dict[str, dict[str, dict[str, Verdict]]] = json.loads(KNOWN_FILE.read_text("utf-8"))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def boards() -> AsyncIterator[dict[str, dict[str, Scoreboard]]]:
    async with SubprocessBackend(Containment(pool_size=2)) as backend:
        yield {
            profile: {name: await run_ptc(backend, cases, profile) for name, cases in CASES.items()}
            for profile in ("python", "restricted")
        }


def passed_by_peer(peer: str, cases: list[Case]) -> set[str]:
    failed = set(PEERS["failures"][peer])
    return {c.id for c in cases if c.id not in failed}


def listing(board: Scoreboard, ids: set[str]) -> str:
    return "\n".join(f"{i}: {board.endings[i].note}" for i in sorted(ids))


def test_the_corpora_are_what_they_claim() -> None:
    assert len(CASES["monty"]) >= 450 and len(CASES["smolagents"]) >= 130
    for name, cases in CASES.items():
        ids = [c.id for c in cases]
        assert len(ids) == len(set(ids)), name
        assert all(c.expect in ("success", "value", "exception") for c in cases)
        document = json.loads((CORPORA_DIR / CORPORA[name]).read_text(encoding="utf-8"))
        assert document["license"] in CORPORA[name]  # the licence is in the file's name too
    assert {p.name for p in CORPORA_DIR.glob("LICENSE-*")} == {
        "LICENSE-pydantic-monty-MIT.txt",
        "LICENSE-smolagents-Apache-2.0.txt",
    }


def test_the_peers_results_cover_these_corpora() -> None:
    # Regenerated corpora need a new `python -m benchmarks.fidelity` run.
    measured = {case for peer in PEERS["counts"] for case in PEERS["failures"][peer]}
    every = {c.id for cases in CASES.values() for c in cases}
    assert measured <= every
    assert {"Monty 1.4", "smolagents 1.26"} <= set(PEERS["counts"])


@pytest.mark.parametrize("corpus", sorted(CORPORA))
async def test_the_python_profile_behaves_as_cpython_on_every_case(
    boards: dict[str, dict[str, Scoreboard]], corpus: str
) -> None:
    board = boards["python"][corpus]
    failed = {c.id for c in CASES[corpus] if board.verdicts[c.id] != "pass"}
    assert not failed, listing(board, failed)


async def test_restricted_accepts_90_percent_of_the_monty_successes_monty_accepts(
    boards: dict[str, dict[str, Scoreboard]],
) -> None:
    cases = [c for c in CASES["monty"] if c.expect != "exception"]
    monty = passed_by_peer("Monty 1.4", cases)
    board = boards["restricted"]["monty"]
    ours = {i for i in monty if board.verdicts[i] == "pass"}
    assert len(ours) >= 0.9 * len(monty), listing(board, monty - ours)


async def test_restricted_accepts_95_percent_of_what_smolagents_accepts(
    boards: dict[str, dict[str, Scoreboard]],
) -> None:
    smolagents = passed_by_peer("smolagents 1.26", CASES["smolagents"])
    board = boards["restricted"]["smolagents"]
    ours = {i for i in smolagents if board.verdicts[i] == "pass"}
    assert len(ours) >= 0.95 * len(smolagents), listing(board, smolagents - ours)


async def test_restricted_raises_the_right_type_on_90_percent_of_monty_errors(
    boards: dict[str, dict[str, Scoreboard]],
) -> None:
    cases = [c for c in CASES["monty"] if c.expect == "exception"]
    board = boards["restricted"]["monty"]
    right = {c.id for c in cases if board.verdicts[c.id] in ("pass", "type")}
    assert len(right) >= 0.9 * len(cases), listing(board, {c.id for c in cases} - right)


@pytest.mark.parametrize("corpus", sorted(CORPORA))
async def test_restricted_fails_exactly_the_known_cases(
    boards: dict[str, dict[str, Scoreboard]], corpus: str
) -> None:
    board = boards["restricted"][corpus]
    failing = {c.id: board.verdicts[c.id] for c in CASES[corpus] if board.verdicts[c.id] != "pass"}
    known = KNOWN["restricted"][corpus]
    new = {i for i, verdict in failing.items() if known.get(i) != verdict}
    assert not new, f"{len(new)} cases fail (or fail otherwise) now:\n{listing(board, new)}"
    fixed = sorted(set(known) - set(failing))
    assert not fixed, f"known failures that pass now: remove them from {KNOWN_FILE.name}: {fixed}"
