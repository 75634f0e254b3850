"""Shared by the layering tests: a package's modules, their imports (including under
``TYPE_CHECKING``, inside functions and through ``importlib.import_module``), cycles,
reads of another module's private attributes, and the groups docs/architecture.md heads a
package's module list with."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Group:
    """One ``####`` heading of a package's ``### Layers`` list in docs/architecture.md and
    the modules under it, bottom first (full names: ``ptc._schema._checks``)."""

    title: str
    folder: str | None
    """The subpackage the group is (``ptc._schema`` for a heading naming `` `_schema/` ``)."""
    entry: str | None
    """The one module the rest of the package imports the group through (``entry `x` ``)."""
    modules: tuple[str, ...]

    def holds(self, module: str) -> bool:
        """Whether ``module`` lies in the group's folder (the folder's ``__init__`` too)."""
        return self.folder is not None and (
            module == self.folder or module.startswith(self.folder + ".")
        )


def documented_groups(section: str, package: str) -> list[Group]:
    """The groups of the ``### Layers`` list under the ``## {section}`` heading of
    docs/architecture.md, bottom first; ``__init__`` there is the package itself."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    body = text.split(f"\n## {section}", 1)[1].split("\n## ", 1)[0]
    body = body.split("\n### Layers", 1)[1].split("\n### ", 1)[0]
    chunks = re.split(r"^#### ", body, flags=re.M)
    assert not re.search(r"^\d+\. `", chunks[0], flags=re.M), "a module listed before any group"

    def full(name: str) -> str:
        return package if name == "__init__" else f"{package}.{name}"

    groups = []
    for chunk in chunks[1:]:
        heading, _, listed = chunk.partition("\n")
        folder = re.search(r"`([\w.]+)/`", heading)
        entry = re.search(r"entry `([\w.]+)`", heading)
        groups.append(
            Group(
                title=heading.split(" — ")[0].strip(),
                folder=full(folder.group(1)) if folder else None,
                entry=full(entry.group(1)) if entry else None,
                modules=tuple(
                    full(name) for name in re.findall(r"^\d+\. `([\w.]+)`", listed, flags=re.M)
                ),
            )
        )
    return groups


def folder_problems(
    groups: list[Group], modules: Iterable[str], subpackages: set[str]
) -> list[str]:
    """How the groups differ from the folders: each subpackage is the folder of exactly one
    group, holding all of the folder's modules and, besides them, at most its entry."""
    problems = []
    folders = [g.folder for g in groups if g.folder is not None]
    if sorted(folders) != sorted(subpackages):
        problems.append(f"group folders {sorted(folders)} != subpackages {sorted(subpackages)}")
    for group in groups:
        if group.folder is None:
            continue
        inside = {m for m in modules if group.holds(m)}
        missing = inside - set(group.modules)
        if missing:
            problems.append(f"{group.title}: {sorted(missing)} are in its folder, not its list")
        strays = {m for m in group.modules if not group.holds(m) and m != group.entry}
        if strays:
            problems.append(f"{group.title}: {sorted(strays)} are outside its folder")
    return problems


def entry_problems(groups: list[Group], graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Imports that enter a group other than through its entry (groups with an entry only)."""
    problems = []
    for group in groups:
        if group.entry is None:
            continue
        private = set(group.modules) - {group.entry}
        for module, imported in sorted(graph.items()):
            if module in group.modules:
                continue
            entered = private & set(imported)
            if entered:
                problems.append(f"{module} imports {sorted(entered)} of {group.title}")
    return problems
