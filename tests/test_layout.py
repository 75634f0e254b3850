"""``tests/`` tests the packages and imports no benchmark (the benchmarks' own tests are
``benchmarks/tests``; the suites run end to end through their command line)."""

from __future__ import annotations

from tests._layering import Package


def test_no_test_module_imports_a_benchmark() -> None:
    tests = Package("tests")
    found = {
        name: sorted(i for i in tests.imports_of(name) if i.split(".")[0] == "benchmarks")
        for name in tests.trees
    }
    assert not {name: imports for name, imports in found.items() if imports}
