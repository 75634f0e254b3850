"""The design rules of section 0 for ``ptc``: its modules form a one-way stack (no cycle
even through ``TYPE_CHECKING`` or function-level imports), no module reaches into another
module's private attributes, nothing imports ``benchmarks`` or ``tests``, ``import ptc``
never reaches an optional integration, the architecture doc lists the real order, and its
groups are the folders: each subpackage is a group, entered only through its entry.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from tests._layering import (
    Package,
    documented_groups,
    entry_problems,
    find_cycle,
    folder_problems,
    without_face,
)

PTC = Package("ptc")
GROUPS = documented_groups("The host side (ptc)", "ptc")


def test_the_modules_of_ptc_form_a_one_way_stack() -> None:
    cycle = find_cycle(without_face(PTC.graph(), "ptc"))
    assert cycle is None, " -> ".join(cycle or [])


@pytest.mark.parametrize("forbidden", ["benchmarks", "tests"])
def test_ptc_never_imports_benchmarks_or_tests(forbidden: str) -> None:
    for name in PTC.trees:
        bad = {i for i in PTC.imports_of(name) if i.split(".")[0] == forbidden}
        assert not bad, f"{name} imports {sorted(bad)}"


def test_optional_integrations_are_not_imported_by_the_package_face() -> None:
    graph = PTC.graph()
    reachable = {"ptc"}
    todo = ["ptc"]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in reachable:
                reachable.add(nxt)
                todo.append(nxt)
    assert "ptc.mcp" not in reachable
    assert not {n for n in reachable if n.startswith("ptc.integrations")}
    frameworks = ("mcp", "pydantic_ai", "agents", "langchain", "langgraph", "anthropic",
                  "opentelemetry")
    assert all(i.split(".")[0] not in frameworks for n in reachable for i in PTC.imports_of(n))


def test_importing_ptc_loads_no_framework() -> None:
    """``import ptc`` in a fresh interpreter leaves every framework module unloaded."""
    probe = (
        "import sys, ptc, ptc.integrations; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))"
    )
    frameworks = ["mcp", "pydantic_ai", "agents", "langchain", "langchain_core", "langgraph",
                  "anthropic", "opentelemetry", "openai"]
    out = subprocess.run(
        [sys.executable, "-c", probe, *frameworks], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_no_module_reaches_into_another_modules_private_attributes() -> None:
    assert PTC.private_reads() == []


def test_the_layer_list_in_the_architecture_doc_is_the_real_order() -> None:
    """docs/architecture.md lists ptc's modules bottom first; each imports only earlier ones."""
    listed = [module for group in GROUPS for module in group.modules]
    graph = PTC.graph()
    assert sorted(listed) == sorted(graph)
    for position, module in enumerate(listed):
        later = graph[module] - set(listed[:position])
        assert not later, f"{module} imports {sorted(later)}, listed after it"


def test_every_subpackage_is_a_group_of_the_doc_holding_its_modules() -> None:
    core = {"ptc._calls", "ptc._suspend", "ptc._sessions", "ptc._scopes", "ptc._code",
            "ptc._observe"}
    assert core | {"ptc._schema", "ptc._cli", "ptc.mcp", "ptc.examples", "ptc.integrations"} <= (
        PTC.packages
    )
    assert folder_problems(GROUPS, PTC.trees, PTC.packages - {"ptc"}) == []


def test_a_group_is_imported_from_outside_only_through_its_entry() -> None:
    assert entry_problems(GROUPS, PTC.graph()) == []


def test_the_group_rules_would_catch_a_breach() -> None:
    schema = next(g for g in GROUPS if g.folder == "ptc._schema")
    assert entry_problems(GROUPS, {"ptc._calls._tools": {"ptc._schema._checks"}})
    assert not entry_problems(GROUPS, {"ptc._calls._tools": {"ptc._schema"}})
    moved_out = dataclasses.replace(schema, modules=schema.modules[1:])
    assert folder_problems([moved_out], PTC.trees, {"ptc._schema"})
    assert folder_problems(GROUPS, PTC.trees, PTC.packages - {"ptc"} | {"ptc._new"})
