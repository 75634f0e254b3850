"""The ``worker`` package is a one-way stack (read from the source, not from what runs).

Every import counts: module level, under ``TYPE_CHECKING`` and inside functions. The rules:
no import cycle between worker's modules; ``worker`` never imports ``ptc``; the child side
(``worker._child``) and everything it pulls in from the rest of ``worker`` (only the group
the architecture doc shares between host and child) import only the standard library,
RestrictedPython and cloudpickle, which the zygote preloads; no module reads another
object's private attributes; the doc lists the real order, and its groups are the folders
(the Ray bridge entered only through ``worker.ray``); only the child's session codec
imports an object deserializer, and nothing the host loads brings it along.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import worker
from tests._layering import documented_groups, entry_problems, folder_problems

ROOT = Path(worker.__file__).parent
GROUPS = documented_groups("The worker package", "worker")
CHILD = "worker._child"
CHILD_MAY_IMPORT = {m for g in GROUPS if g.title in ("Foundations", "Protocol") for m in g.modules}
"""The modules outside ``_child/`` the child may load (the doc's groups shared by host and
child): the errors, the plain values, and the protocol (the framing and its raw-byte JSON
checks, a session state's frames, the frame schemas, the supervisor's lines, the spawn
configuration)."""
GROUP_FOLDERS = {"worker._protocol", "worker._kernel", "worker._supervisor", "worker._host"}
"""The core's groups (DESIGN section 0: protocol, kernel mechanisms, the run's supervisor,
the host side), each a folder whose ``__init__`` says what it is and imports nothing."""
CHILD_THIRD_PARTY = {"RestrictedPython", "cloudpickle"}
ZYGOTE_THIRD_PARTY = {"RestrictedPython", "pyseccomp", "cloudpickle"}
"""The keeper and child processes also load pyseccomp (the seccomp filter) and cloudpickle
(a session's state)."""
PRIVATE_OK = {("os", "_exit")}
"""Private names of other modules that are documented API (``os._exit`` in a forked child)."""


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_name(p): p for p in sorted(ROOT.rglob("*.py"))}


@cache
def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"), str(MODULES[module]))


def imports_of(node: ast.Import | ast.ImportFrom, module: str) -> set[str]:
    """The full names one import statement in ``module`` imports.

    ``from P import x`` counts as importing ``P.x`` when that is a worker module, else
    ``P``; importing a submodule does not count its parent packages (their ``__init__``
    runs, but that is Python's doing, not an edge of the stack)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if node.level:
        is_package = MODULES[module].name == "__init__.py"
        package = module if is_package else module.rpartition(".")[0]
        base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        base = f"{base}.{node.module}" if node.module else base
    else:
        base = node.module or ""
    return {
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
        for alias in node.names
    }


@cache
def imports(module: str) -> frozenset[str]:
    """Every module ``module`` imports anywhere in its source, resolved to full names
    (``importlib.import_module`` with a literal name counts too)."""
    found: set[str] = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found |= imports_of(node, module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return frozenset(found)


@cache
def module_level_imports(module: str) -> frozenset[str]:
    """The worker modules ``module`` imports when it is imported (not in functions and not
    under ``TYPE_CHECKING``): what a preloaded module brings along."""
    found: set[str] = set()
    for node in _tree(module).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update(name for name in imports_of(node, module) if name in MODULES)
    return frozenset(found)


def in_child(module: str) -> bool:
    return module == CHILD or module.startswith(CHILD + ".")


def internal(module: str) -> set[str]:
    return {name for name in imports(module) if name in MODULES}


def external(module: str) -> set[str]:
    return {name.partition(".")[0] for name in imports(module) if name not in MODULES}


def closure(start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for name in internal(todo.pop()) - seen:
            seen.add(name)
            todo.append(name)
    return seen


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import cycle in ``graph`` (module -> modules it imports), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for name in sorted(graph.get(module, ())):
            if state.get(name) == 1:
                return path[path.index(name) :] + [name]
            if name not in state and (cycle := visit(name)) is not None:
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def worker_graph() -> dict[str, set[str]]:
    return {module: internal(module) for module in MODULES}


def test_the_source_is_read_the_way_python_resolves_it() -> None:
    assert {"worker", CHILD, "worker._host._backend", "worker._child._program"} <= set(MODULES)
    assert "worker._protocol._framing" in internal("worker._child._transport")
    assert "worker._child" in internal("worker._supervisor._confine")  # a function-level import
    # a function-level import too:
    assert "worker._supervisor._confine" in internal("worker._supervisor._zygote")


def test_no_import_cycle_inside_worker() -> None:
    cycle = find_cycle(worker_graph())
    assert cycle is None, " -> ".join(cycle)


def test_a_cycle_would_be_found() -> None:
    graph = worker_graph()
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    graph["worker._types"].add("worker._host._backend")
    assert find_cycle(graph) is not None


def test_worker_never_imports_ptc() -> None:
    offenders = {m for m in MODULES if {"ptc", "benchmarks", "tests"} & external(m)}
    assert not offenders


def test_the_child_side_imports_only_the_stdlib_and_what_the_zygote_preloads() -> None:
    child_side = set().union(*(closure(m) for m in MODULES if in_child(m)))
    outside = {m for m in child_side if not in_child(m)}
    assert outside <= CHILD_MAY_IMPORT, outside - CHILD_MAY_IMPORT
    for module in sorted(child_side):
        foreign = external(module) - set(sys.stdlib_module_names) - CHILD_THIRD_PARTY
        assert not foreign, f"{module} imports {sorted(foreign)}"


def test_the_zygote_preloads_every_worker_module_a_child_may_import() -> None:
    from worker._child._restricted import ALLOWED_MODULES as restricted_allows
    from worker._supervisor._zygote import ALLOWED_MODULES, PRELOAD

    assert set(ALLOWED_MODULES) == restricted_allows
    preloaded = {name for name in PRELOAD if name in MODULES}
    todo = list(preloaded)
    while todo:
        for name in module_level_imports(todo.pop()) - preloaded:
            preloaded.add(name)
            todo.append(name)
    child_side = set().union(*(closure(m) for m in MODULES if in_child(m)))
    assert child_side <= preloaded, sorted(child_side - preloaded)
    assert CHILD_THIRD_PARTY <= set(PRELOAD)


def test_the_zygote_and_keeper_import_only_the_stdlib_and_what_they_preload() -> None:
    for module in sorted(closure("worker._supervisor._zygote")):
        foreign = external(module) - set(sys.stdlib_module_names) - ZYGOTE_THIRD_PARTY
        assert not foreign, f"{module} imports {sorted(foreign)}"


def test_no_module_reads_another_objects_private_attributes() -> None:
    offenders: list[str] = []
    for module in sorted(MODULES):
        for node in ast.walk(_tree(module)):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if not attr.startswith("_") or (attr.startswith("__") and attr.endswith("__")):
                continue
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner in ("self", "cls") or (owner, attr) in PRIVATE_OK:
                continue
            offenders.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert not offenders, "\n".join(offenders)


def test_the_documented_stack_is_the_real_one() -> None:
    """docs/architecture.md lists worker's modules bottom first; each imports only earlier ones."""
    listed = [module for group in GROUPS for module in group.modules]
    assert sorted(listed) == sorted(MODULES)
    for position, module in enumerate(listed):
        later = internal(module) - set(listed[:position])
        assert not later, f"{module} imports {sorted(later)}, listed after it"


def test_every_subpackage_is_a_group_of_the_doc_holding_its_modules() -> None:
    subpackages = {m for m, path in MODULES.items() if path.name == "__init__.py"} - {"worker"}
    assert subpackages == {CHILD, "worker._ray", *GROUP_FOLDERS}
    assert CHILD_MAY_IMPORT == {
        "worker._types",
        "worker._errors",
        "worker._protocol",
        "worker._protocol._framing",
        "worker._protocol._json_bytes",
        "worker._protocol._messages",
        "worker._protocol._state",
        "worker._protocol._keeper_lines",
        "worker._protocol._spawn_config",
    }
    assert folder_problems(GROUPS, MODULES, subpackages) == []


def test_a_group_folder_says_what_it_is_and_imports_nothing() -> None:
    """Importing one module of a group runs its folder's ``__init__`` first: one that
    imported its modules would load them all, in the child too (which may load only the
    stdlib and what the zygote preloads) and in the zygote."""
    for folder in sorted(GROUP_FOLDERS | {"worker._ray"}):
        tree = _tree(folder)
        assert ast.get_docstring(tree), f"{folder} has no docstring"
        body = [node for node in tree.body if not isinstance(node, ast.Expr)]
        assert body == [], f"{folder}/__init__.py does more than say what the group is"


def test_the_ray_bridge_is_imported_only_through_worker_ray() -> None:
    ray = next(g for g in GROUPS if g.folder == "worker._ray")
    assert ray.entry == "worker.ray"
    assert entry_problems(GROUPS, worker_graph()) == []
    graph = worker_graph()
    graph["worker._host._backend"].add("worker._ray._wire")
    assert entry_problems(GROUPS, graph)  # a breach would be found


DESERIALIZERS = {"pickle", "_pickle", "cloudpickle", "dill", "marshal", "shelve", "jsonpickle"}
"""Modules that turn bytes into arbitrary objects (some by running code the bytes name)."""
SESSION_CODEC = "worker._child._session"
"""The one module that deserializes a session's state, inside the contained child."""


def _foreign_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.partition(".")[0])
    return found


def loaded_with(module: str) -> set[str]:
    """The worker modules importing ``module`` loads (module-level imports, transitively;
    a function-level import runs only where the function does: the zygote's
    ``precompile_sdk`` imports the child runtime in the zygote, not in the host)."""
    seen = {module}
    todo = [module]
    while todo:
        for name in module_level_imports(todo.pop()) - seen:
            seen.add(name)
            todo.append(name)
    return seen


def test_only_the_childs_session_codec_imports_an_object_deserializer() -> None:
    """No module of ptc, sdkgen or worker but ``_child._session`` imports pickle, marshal,
    cloudpickle or their kind, and no module the host loads brings that one along: a
    session's state is deserialized only inside the contained child (docs/security.md)."""
    importers = set()
    for package in ("ptc", "sdkgen", "worker"):
        for path in sorted((ROOT.parent / package).rglob("*.py")):
            if _foreign_imports(path) & DESERIALIZERS:
                importers.add(str(path.relative_to(ROOT.parent)))
    assert importers == {"worker/_child/_session.py"}
    host = ["worker", "worker.testing", "worker.ray"]
    reaching = sorted(m for m in host if SESSION_CODEC in loaded_with(m))
    assert reaching == [], reaching


def test_a_host_module_reaching_the_codec_would_be_found() -> None:
    assert SESSION_CODEC in loaded_with("worker._child._runtime")
    assert SESSION_CODEC in loaded_with("worker._child")
