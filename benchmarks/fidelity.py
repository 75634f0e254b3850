"""The fidelity scoreboard: ptc's two profiles, pydantic-monty and smolagents on the corpora.

``python -m benchmarks.fidelity`` runs every case of ``tests/corpora/`` (pydantic-monty's
own test cases and smolagents' executor tests, kept where CPython 3.11 passes them)
through:

- ptc ``python`` and ``restricted``: real contained children, many cases per child
  (``tests.worker.fidelity.run_ptc``);
- pydantic-monty 1.4 (the ``bench`` extra): one fresh session of its worker pool per case,
  ``feed_run`` (the value of a trailing expression; an exception's type and ``str``);
- smolagents 1.26 (the ``bench`` extra): ``evaluate_python_code`` with its base tools and
  default imports, as ``LocalPythonExecutor`` calls it, plus the imports a smolagents test
  authorized for its own case (an error's type is read from its ``InterpreterError``
  message).

It writes ``benchmarks/results/fidelity.json`` (every verdict, and what each failure
said) and ``fidelity.md`` (the table). The test suite's scoreboard
(``tests/worker/test_fidelity.py``) reads the Monty and smolagents counts from the JSON for
its thresholds, since those two runtimes are benchmark dependencies.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from benchmarks import _stats
from tests.worker.fidelity import (
    CORPORA,
    Case,
    Ending,
    Scoreboard,
    is_plain_json,
    judge,
    load_corpus,
    run_ptc,
)
from worker import Containment
from worker._host._backend import SubprocessBackend

RUNNERS = ("ptc python", "ptc restricted", "Monty 1.4", "smolagents 1.26")
ROWS = (
    ("monty", ("success", "value"), "Monty, expects success"),
    ("monty", ("exception",), "Monty, expects an exception (type and message)"),
    ("smolagents", ("success", "value"), "smolagents, expects success"),
)


def _qualified(exc: BaseException) -> str:
    kind = type(exc)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def monty_runner() -> tuple[Callable[[Case], Ending], Callable[[], None]]:
    import pydantic_monty

    # Limits like ptc's defaults (one of Monty's own cases runs forever without them).
    limits = pydantic_monty.ResourceLimits(max_feed_duration_secs=20.0, max_memory=512 << 20)
    pool = pydantic_monty.Monty(min_processes=2)
    pool.__enter__()

    def run(case: Case) -> Ending:
        printed: list[str] = []

        def on_print(stream: str, text: str) -> None:
            printed.append(text)

        try:
            with pool.checkout(limits=limits) as session:
                value = session.feed_run(case.code, print_callback=on_print)
        except (pydantic_monty.MontyRuntimeError, pydantic_monty.MontySyntaxError) as exc:
            inner = exc.exception()
            name, message = _qualified(inner), str(inner)
            return Ending(
                ok=False,
                error_type=name,
                error_message=message,
                stdout="".join(printed),
                note=f"{name}: {message}"[:300],
            )
        except pydantic_monty.MontyError as exc:
            return Ending(ok=False, stdout="".join(printed), note=repr(exc)[:300])
        if is_plain_json(value):
            return Ending(ok=True, has_value=True, value=value, stdout="".join(printed))
        return Ending(ok=True, stdout="".join(printed), note=f"value {value!r}"[:300])

    return run, lambda: pool.__exit__(None, None, None)


_SMOL_ERROR = re.compile(r"due to: (\w+(?:\.\w+)*): ?(.*)", re.DOTALL)


def smolagents_runner() -> tuple[Callable[[Case], Ending], Callable[[], None]]:
    from smolagents.default_tools import BASE_PYTHON_TOOLS
    from smolagents.local_python_executor import evaluate_python_code
    from smolagents.utils import BASE_BUILTIN_MODULES

    def run(case: Case) -> Ending:
        state: dict[str, Any] = {}
        try:
            value, _final = evaluate_python_code(
                case.code,
                dict(BASE_PYTHON_TOOLS),
                state=state,
                authorized_imports=[*BASE_BUILTIN_MODULES, *case.authorized_imports],
                timeout_seconds=30,
            )
        except Exception as exc:  # noqa: BLE001 - every failure is a verdict
            printed = str(state.get("_print_outputs", ""))
            text = str(exc)
            match = _SMOL_ERROR.search(text)
            if match is not None:
                name, message = match.group(1), match.group(2)
                return Ending(
                    ok=False,
                    error_type=name,
                    error_message=message,
                    stdout=printed,
                    note=text[:300],
                )
            return Ending(
                ok=False,
                error_type=_qualified(exc),
                error_message=text,
                stdout=printed,
                note=text[:300],
            )
        printed = str(state.get("_print_outputs", ""))
        if is_plain_json(value):
            return Ending(ok=True, has_value=True, value=value, stdout=printed)
        return Ending(ok=True, stdout=printed, note=f"value {value!r}"[:300])

    return run, lambda: None


def run_peer(runner: Callable[[Case], Ending], cases: Sequence[Case]) -> Scoreboard:
    board = Scoreboard()
    for case in cases:
        ending = runner(case)
        board.endings[case.id] = ending
        board.verdicts[case.id] = judge(case, ending)
    return board


async def run_ptc_profiles(corpora: dict[str, list[Case]]) -> dict[str, dict[str, Scoreboard]]:
    boards: dict[str, dict[str, Scoreboard]] = {}
    async with SubprocessBackend(Containment(pool_size=2)) as backend:
        for profile in ("python", "restricted"):
            boards[f"ptc {profile}"] = {
                name: await run_ptc(backend, cases, profile) for name, cases in corpora.items()
            }
    return boards


def table(corpora: dict[str, list[Case]], boards: dict[str, dict[str, Scoreboard]]) -> str:
    present = [r for r in RUNNERS if r in boards]
    lines = [
        "| corpus | cases | " + " | ".join(present) + " |",
        "|---|---|" + "---|" * len(present),
    ]
    for corpus, expects, label in ROWS:
        cases = [c for c in corpora[corpus] if c.expect in expects]
        cells = []
        for runner in present:
            board = boards[runner][corpus]
            passed = board.count(cases, "pass")
            if expects == ("exception",):
                typed = board.count(cases, "pass", "type")
                cells.append(f"{passed} (type only: {typed})")
            else:
                cells.append(str(passed))
        lines.append(f"| {label} | {len(cases)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def counts(
    corpora: dict[str, list[Case]], board_by_corpus: dict[str, Scoreboard]
) -> dict[str, int]:
    """The figures the test suite's thresholds are computed from."""
    monty, smol = corpora["monty"], corpora["smolagents"]
    m_ok = [c for c in monty if c.expect != "exception"]
    m_err = [c for c in monty if c.expect == "exception"]
    return {
        "monty_success": board_by_corpus["monty"].count(m_ok, "pass"),
        "monty_exception": board_by_corpus["monty"].count(m_err, "pass"),
        "monty_exception_type": board_by_corpus["monty"].count(m_err, "pass", "type"),
        "smolagents_success": board_by_corpus["smolagents"].count(smol, "pass"),
    }


def thresholds(
    corpora: dict[str, list[Case]], boards: dict[str, dict[str, Scoreboard]]
) -> list[str]:
    """DESIGN section 5's targets for the restricted profile, as measured."""
    if not {"ptc restricted", "Monty 1.4", "smolagents 1.26"} <= set(boards):
        return []
    ours = boards["ptc restricted"]
    m_ok = [c for c in corpora["monty"] if c.expect != "exception"]
    m_err = [c for c in corpora["monty"] if c.expect == "exception"]
    monty = {c.id for c in m_ok if boards["Monty 1.4"]["monty"].verdicts[c.id] == "pass"}
    smol = {
        c.id
        for c in corpora["smolagents"]
        if boards["smolagents 1.26"]["smolagents"].verdicts[c.id] == "pass"
    }
    both_m = sum(ours["monty"].verdicts[i] == "pass" for i in monty)
    both_s = sum(ours["smolagents"].verdicts[i] == "pass" for i in smol)
    typed = ours["monty"].count(m_err, "pass", "type")
    return [
        f"- restricted accepts {both_m} of the {len(monty)} Monty success cases Monty accepts "
        f"({both_m / len(monty):.1%}; target 90%)",
        f"- restricted accepts {both_s} of the {len(smol)} smolagents cases smolagents accepts "
        f"({both_s / len(smol):.1%}; target 95%)",
        f"- restricted raises the right exception type on {typed} of {len(m_err)} Monty error "
        f"cases ({typed / len(m_err):.1%}; target 90%)",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fidelity", description=__doc__)
    parser.add_argument("--only", choices=("ptc", "peers"), help="run only these columns")
    parser.add_argument(
        "--out", default=str(_stats.RESULTS_DIR / "fidelity"), help="results path without extension"
    )
    args = parser.parse_args(argv)
    corpora = {name: load_corpus(name) for name in CORPORA}
    boards: dict[str, dict[str, Scoreboard]] = {}
    seconds: dict[str, float] = {}
    if args.only != "peers":
        started = time.monotonic()
        boards.update(anyio.run(run_ptc_profiles, corpora))
        seconds["ptc"] = time.monotonic() - started
    if args.only != "ptc":
        for label, factory in (("Monty 1.4", monty_runner), ("smolagents 1.26", smolagents_runner)):
            started = time.monotonic()
            runner, close = factory()
            try:
                boards[label] = {n: run_peer(runner, cases) for n, cases in corpora.items()}
            finally:
                close()
            seconds[label] = time.monotonic() - started
    text = table(corpora, boards)
    targets = thresholds(corpora, boards)
    print(text + ("\n\n" + "\n".join(targets) if targets else ""))
    document: dict[str, Any] = {
        "machine": _stats.machine_facts(),
        "command": "python -m benchmarks.fidelity" + (f" --only {args.only}" if args.only else ""),
        "seconds": seconds,
        "table": text,
        "targets": targets,
        "counts": {runner: counts(corpora, b) for runner, b in boards.items()},
        "failures": {
            runner: {
                case.id: {
                    "verdict": b[name].verdicts[case.id],
                    "said": b[name].endings[case.id].note,
                }
                for name, cases in corpora.items()
                for case in cases
                if b[name].verdicts[case.id] != "pass"
            }
            for runner, b in boards.items()
        },
    }
    with open(args.out + ".json", "w", encoding="utf-8") as fh:
        json.dump(document, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    with open(args.out + ".md", "w", encoding="utf-8") as fh:
        fh.write("# Fidelity on peers' own corpora\n\n`" + document["command"] + "`\n\n")
        fh.write(text + "\n")
        if targets:
            fh.write("\n" + "\n".join(targets) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
