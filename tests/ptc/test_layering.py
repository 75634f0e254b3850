"""The design rules of section 0, enforced: ``ptc``'s modules form a one-way stack (no
cycle even through ``TYPE_CHECKING`` or function-level imports), no module reaches into
another module's private attributes, and nothing imports ``benchmarks`` or ``tests``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ptc"
# Private names of the standard library and third parties that are their public API.
FOREIGN_PRIVATE = {"_exit", "_replace", "_asdict", "_fields", "_getframe"}


PACKAGES: set[str] = set()


def modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        if path.name == "__init__.py":
            PACKAGES.add(name)
        found[name] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return found


def imports_of(name: str, tree: ast.Module) -> set[str]:
    """Every module ``name`` imports anywhere in its source (top level, TYPE_CHECKING
    blocks and function bodies alike)."""
    package = name if name in PACKAGES else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if node.module or not node.level:
                out.add(target)  # ``from . import x`` imports the submodule x only
            out.update(f"{target}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            out.add(str(node.args[0].value))  # importlib.import_module("ptc._x") counts too
    return out


def internal_graph() -> dict[str, set[str]]:
    trees = modules()
    return {
        name: {i for i in imports_of(name, tree) if i in trees and i != name}
        for name, tree in trees.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_modules_of_ptc_form_a_one_way_stack() -> None:
    graph = internal_graph()
    # The package face imports everything; its modules never import it back.
    graph.pop("ptc")
    for imported in graph.values():
        imported.discard("ptc")
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


@pytest.mark.parametrize("forbidden", ["benchmarks", "tests"])
def test_ptc_never_imports_benchmarks_or_tests(forbidden: str) -> None:
    for name, tree in modules().items():
        bad = {i for i in imports_of(name, tree) if i.split(".")[0] == forbidden}
        assert not bad, f"{name} imports {sorted(bad)}"


def test_optional_integrations_are_not_imported_by_the_package_face() -> None:
    trees = modules()
    reachable = {"ptc"}
    todo = ["ptc"]
    graph = internal_graph()
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in reachable:
                reachable.add(nxt)
                todo.append(nxt)
    assert "ptc.mcp" not in reachable
    assert all(not i.startswith("mcp") for n in reachable for i in imports_of(n, trees[n]))


def private_definitions(tree: ast.Module) -> set[str]:
    """Private names a module defines: ``self._x = ...``, ``def _x``, slots, class fields."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id == "__slots__" and isinstance(node.value, ast.Tuple):
                        names.update(
                            str(e.value) for e in node.value.elts if isinstance(e, ast.Constant)
                        )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # object.__setattr__(self, "_x", ...) and slot strings
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_module_reaches_into_another_modules_private_attributes() -> None:
    problems = []
    for name, tree in modules().items():
        own = private_definitions(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if not attr.startswith("_") or attr.startswith("__") or attr in FOREIGN_PRIVATE:
                continue
            if attr not in own:
                problems.append(f"{name}:{node.lineno} .{attr}")
    assert not problems, problems


def test_the_layer_list_in_the_architecture_doc_is_the_real_order() -> None:
    """docs/architecture.md lists ptc's modules bottom first; each imports only earlier ones."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The host side (ptc)", 1)[1].split("\n## ", 1)[0]
    section = section.split("### Layers", 1)[1].split("\n### ", 1)[0]
    listed = [
        "ptc" if name == "__init__" else f"ptc.{name}"
        for name in re.findall(r"^\d+\. `([\w.]+)`", section, flags=re.M)
    ]
    graph = internal_graph()
    assert sorted(listed) == sorted(graph)
    for position, module in enumerate(listed):
        later = graph[module] - set(listed[:position])
        assert not later, f"{module} imports {sorted(later)}, listed after it"
