"""The design rules of section 0 for ``ptc``: its modules form a one-way stack (no cycle
even through ``TYPE_CHECKING`` or function-level imports), no module reaches into another
module's private attributes, nothing imports ``benchmarks`` or ``tests``, ``import ptc``
never reaches an optional integration, and the architecture doc lists the real order.
"""

from __future__ import annotations

import re

import pytest

from tests._layering import ROOT, Package, find_cycle, without_face

PTC = Package("ptc")


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
    assert all(not i.startswith("mcp") for n in reachable for i in PTC.imports_of(n))


def test_no_module_reaches_into_another_modules_private_attributes() -> None:
    assert PTC.private_reads() == []


def test_the_layer_list_in_the_architecture_doc_is_the_real_order() -> None:
    """docs/architecture.md lists ptc's modules bottom first; each imports only earlier ones."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The host side (ptc)", 1)[1].split("\n## ", 1)[0]
    section = section.split("### Layers", 1)[1].split("\n### ", 1)[0]
    listed = [
        "ptc" if name == "__init__" else f"ptc.{name}"
        for name in re.findall(r"^\d+\. `([\w.]+)`", section, flags=re.M)
    ]
    graph = PTC.graph()
    assert sorted(listed) == sorted(graph)
    for position, module in enumerate(listed):
        later = graph[module] - set(listed[:position])
        assert not later, f"{module} imports {sorted(later)}, listed after it"
