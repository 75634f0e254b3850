"""What today's ptc does in each environment: ``run_code("return 1")`` twice with
``Containment(require=())``, the enforcement each run reports and what ``backend.probe()``
predicted. A record, not a verdict: only the harness's part is asserted (the host ran, gave
two results, nothing of it survived). Read the report with
``pytest tests/environments/test_demo.py -s``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.environments import BY_NAME, ENVIRONMENTS, Harness
from worker import Containment, Limits

RELAXED = Containment(require=frozenset())
# Short: a run that never gets its child waits out the whole wall clock (E4d today).
SHORT = Limits(wall_seconds=5.0)


def report(env: str, output: dict[str, Any]) -> str:
    lines = [f"== {env}: {BY_NAME[env].stands_for}"]
    for i, result in enumerate(output["results"], 1):
        if result["is_error"]:
            error = result["error"]
            lines.append(f"run {i}: {error['code']}: {error['message'].splitlines()[0]}")
        else:
            lines.append(f"run {i}: ok, result {result['value']['result']!r}")
        for dim, e in result["meta"].get("enforcement", {}).items():
            gap = f"  (gap: {e['gap']})" if e["gap"] else ""
            lines.append(f"    {dim:<11} {e['level']:<8} {e['mechanism']}{gap}")
    predicted = ", ".join(f"{d} {e['level']}" for d, e in output["probe"].items())
    lines.append(f"probe() predicted: {predicted}")
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_what_a_relaxed_run_reports_in_each_environment(envsim: Harness, env: str) -> None:
    run = envsim.run_code(env, ["return 1", "return 1"], containment=RELAXED, limits=SHORT)
    assert run.output is not None and len(run.results) == 2
    print("\n" + report(env, run.output))
    if run.survivors or run.leftovers:
        print(f"left behind: {run.survivors + run.leftovers}")
    assert run.survivors == ()
