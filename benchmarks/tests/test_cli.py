"""``python -m benchmarks``: the demo and the suites get the arguments meant for them."""

from __future__ import annotations

import pytest

import benchmarks.__main__ as bench_cli
from benchmarks import _stats, latency, native_vs_code, scale


@pytest.fixture
def suite_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    calls: list[tuple[str, list[str]]] = []

    def record(name: str, status: int) -> object:
        def main(argv: list[str]) -> int:
            calls.append((name, argv))
            return status

        return main

    monkeypatch.setattr(native_vs_code, "main", record("suite", 0))
    monkeypatch.setattr(latency, "main", record("latency", 1))
    monkeypatch.setattr(scale, "main", record("scale", 0))
    return calls


def test_demo_runs_the_quick_suite_beside_the_committed_results(
    suite_calls: list[tuple[str, list[str]]],
) -> None:
    out = str(_stats.RESULTS_DIR / "demo")
    assert bench_cli.main(["demo"]) == 0
    assert bench_cli.main(["demo", "--full"]) == 0
    assert suite_calls == [("suite", ["--out", out, "--quick"]), ("suite", ["--out", out])]


def test_the_suites_get_every_argument_after_the_command(
    suite_calls: list[tuple[str, list[str]]],
) -> None:
    assert bench_cli.main(["suite", "--reps", "3", "--help"]) == 0
    assert bench_cli.main(["latency", "--quick"]) == 1
    assert bench_cli.main(["all", "--quick"]) == 1
    assert bench_cli.main(["scale", "--sizes", "10"]) == 0
    assert suite_calls == [
        ("suite", ["--reps", "3", "--help"]),
        ("latency", ["--quick"]),
        ("suite", ["--quick"]),
        ("latency", ["--quick"]),
        ("scale", ["--sizes", "10"]),
    ]


@pytest.mark.parametrize("argv", [["demo", "--nope"], ["bench"], []])
def test_bad_benchmark_commands_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        bench_cli.main(argv)
    assert info.value.code == 2
