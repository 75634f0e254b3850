"""Shared by the layering tests: a package's modules, their imports (including under
``TYPE_CHECKING``, inside functions and through ``importlib.import_module``), cycles, and
reads of another module's private attributes."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Private names of the standard library and third parties that are their public API.
FOREIGN_PRIVATE = {"_exit", "_replace", "_asdict", "_fields", "_getframe"}


class Package:
    """The modules of one package of the repository, parsed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.packages: set[str] = set()
        self.trees: dict[str, ast.Module] = {}
        for path in sorted((ROOT / name).rglob("*.py")):
            relative = path.relative_to(ROOT).with_suffix("")
            module = ".".join(relative.parts).removesuffix(".__init__")
            if path.name == "__init__.py":
                self.packages.add(module)
            self.trees[module] = ast.parse(path.read_text(encoding="utf-8"), str(path))

    def imports_of(self, module: str) -> set[str]:
        """Every module ``module`` imports anywhere in its source."""
        package = module if module in self.packages else module.rpartition(".")[0]
        out: set[str] = set()
        for node in ast.walk(self.trees[module]):
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
                out.add(str(node.args[0].value))  # importlib.import_module("x._y") counts
        return out

    def graph(self) -> dict[str, set[str]]:
        """Module -> the package's modules it imports."""
        return {
            name: {i for i in self.imports_of(name) if i in self.trees and i != name}
            for name in self.trees
        }

    def private_reads(self) -> list[str]:
        """``module:line .attr`` for every read of a private attribute the module does not
        define itself."""
        problems = []
        for name, tree in self.trees.items():
            own = private_definitions(tree)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Attribute):
                    continue
                attr = node.attr
                if not attr.startswith("_") or attr.startswith("__"):
                    continue
                if attr not in own and attr not in FOREIGN_PRIVATE:
                    problems.append(f"{name}:{node.lineno} .{attr}")
        return problems


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


def without_face(graph: dict[str, set[str]], face: str) -> dict[str, set[str]]:
    """The graph minus the package face, which imports everything and is imported back by
    modules on top of it (examples, integrations)."""
    return {k: v - {face} for k, v in graph.items() if k != face}


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
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # object.__setattr__(self, "_x", ...) and slot strings
    return {n for n in names if n.startswith("_") and not n.startswith("__")}
