"""Pre-flight checks on a program before any worker starts.

Only what is *certainly* wrong fails here: a syntax error, a ``tools.X`` that names no
visible tool, a call whose arguments cannot fit the tool, an import of the predefined
globals, or (``restricted`` profile) a construct RestrictedPython refuses to compile.
Anything dynamic is left to run time, where the SDK raises the same errors. Syntax and
policy are judged by the worker's own :func:`worker.parse_program` /
:func:`worker.compile_program`, so a program fails here exactly as it would fail in the
child, with the same detail and the user's line numbers.

Every message is one line that names the fix, written for the model that wrote the
program: an unknown tool lists at most :data:`MAX_SUGGESTIONS` close names and then how
many others exist (``catalog.search`` finds them); the names models carry over from the
tools' original spelling (``tools.web-search(...)``, which Python reads as ``tools.web -
search(...)``; ``tools.fmp.income_statement(...)``) and from other runtimes
(``functions.x``, ``default_api.x``, a bare ``get_weather(...)``) are recognised and mapped
to the identifier; a positional call is shown with its keywords; a keyword that is close to
a declared parameter (``units`` for ``unit``) is refused even where the schema is open.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import re
from dataclasses import dataclass
from typing import Literal

from sdkgen import AST_LOCK, Sdk, ToolBinding
from worker import CompileFailure, compile_program, parse_program

PreflightKind = Literal["syntax", "preflight", "policy"]

MAX_SUGGESTIONS = 10
_SDK_GLOBALS = ("tools", "catalog", "parallel", "ToolCallError")
# What other runtimes call the tools' namespace (OpenAI's `functions.`, Gemini's
# `default_api.`): models trained on them write it here too.
_FOREIGN_NAMESPACES = ("functions", "default_api", "api")
_NAME_RUN = re.compile(r"tools\s*\.\s*([A-Za-z0-9_.\-]+)")
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True, kw_only=True)
class PreflightError:
    kind: PreflightKind
    detail: str


def check_program(code: str, sdk: Sdk, profile: str) -> PreflightError | None:
    """Return the first certain error in ``code``, or ``None`` when it may run."""
    with AST_LOCK:  # shared with the SDK builders' threads (sdkgen.AST_LOCK says why)
        tree = parse_program(code)
    if isinstance(tree, CompileFailure):
        return PreflightError(kind=tree.kind, detail=tree.detail)
    problem = _Checker(code, sdk, tree).first_problem()
    if problem is not None:
        return PreflightError(kind="preflight", detail=problem)
    # What only compiling finds: `break` outside a loop, say, or the restricted policy
    # (last: the policy rewrites the tree).
    with AST_LOCK:
        compiled = compile_program(code, profile=profile, tree=tree)
    if isinstance(compiled, CompileFailure):
        return PreflightError(kind=compiled.kind, detail=compiled.detail)
    return None


class _Checker:
    def __init__(self, code: str, sdk: Sdk, tree: ast.Module) -> None:
        self._lines = code.splitlines()
        # One walk of the tree (in ast.walk's order), which every check reads: a walk
        # costs more than the checks, and there were five.
        self._nodes = list(ast.walk(tree))
        self._bindings = sdk.by_ident()
        self._by_name = {b.name: b for b in sdk.tools}
        self._bound = _bound_names(self._nodes)

    def first_problem(self) -> str | None:
        for check in (self._imports, self._tool_uses, self._foreign_names):
            problem = check()
            if problem is not None:
                return problem
        return None

    # -- imports of the predefined globals ---------------------------------------------

    def _imports(self) -> str | None:
        for node in self._nodes:
            module = None
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                module = node.module
            elif isinstance(node, ast.Import):
                module = next((a.name for a in node.names if a.name in _SDK_GLOBALS), None)
            if module in _SDK_GLOBALS:
                return (
                    f"line {_line(node)}: `{module}` is not a module: it is predefined; drop the "
                    f"import and use it directly ({_usage(module)})"
                )
        return None

    # -- tools.X -------------------------------------------------------------------------

    def _tool_uses(self) -> str | None:
        if "tools" in self._bound:
            return None  # `tools` is no longer the SDK namespace: nothing is certain
        for node in self._nodes:
            if isinstance(node, ast.Call):
                problem = self._call(node)
                if problem is not None:
                    return problem
        # A bare attribute (`f = tools.nope`) is as certainly wrong as a call.
        for node in self._nodes:
            if _is_tools_attribute(node):
                assert isinstance(node, ast.Attribute)
                if node.attr not in self._bindings and node.attr != "call":
                    return self._unknown_tool(node)
        return None

    def _call(self, call: ast.Call) -> str | None:
        func = call.func
        if _is_tools_attribute(func):
            assert isinstance(func, ast.Attribute)
            if func.attr == "call":
                return self._call_by_name(call)
            binding = self._bindings.get(func.attr)
            if binding is None:
                return self._unknown_tool(func)
            return _check_arguments(binding, call)
        is_map = isinstance(func, ast.Attribute) and func.attr == "map"
        if is_map and _is_tools_attribute(func.value):  # type: ignore[attr-defined]
            inner = func.value  # type: ignore[attr-defined]
            if inner.attr not in self._bindings:
                return self._unknown_tool(inner)
        return None

    def _call_by_name(self, call: ast.Call) -> str | None:
        first = call.args[0] if call.args else None
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            return None  # a name known only at run time
        name = first.value
        if name in self._by_name or name in self._bindings:
            return None
        return (
            f"line {_line(call)}: tools.call({name!r}): no visible tool has this name"
            f"{self._suggestions(name)}"
        )

    def _unknown_tool(self, node: ast.Attribute) -> str:
        written = self._written_name(node)
        mapped = self._mapped(written)
        if mapped is not None and written != mapped.ident:
            reads = f" (Python reads {_as_python(written)})" if "-" in written else ""
            return (
                f"line {_line(node)}: the tool {mapped.name!r} is tools.{mapped.ident}, not "
                f"tools.{written}{reads}: write tools.{mapped.ident}(...) or "
                f"tools.call({mapped.name!r}, ...)"
            )
        return f"line {_line(node)}: tools.{node.attr} does not exist{self._suggestions(node.attr)}"

    def _written_name(self, node: ast.Attribute) -> str:
        """What follows ``tools.`` in the source, dashes and dots included."""
        line = self._lines[node.lineno - 1] if 0 < node.lineno <= len(self._lines) else ""
        match = _NAME_RUN.match(line, node.col_offset)
        return match.group(1).rstrip(".-") if match else node.attr

    def _mapped(self, written: str) -> ToolBinding | None:
        """The tool ``written`` names: the longest prefix that is a tool's original name,
        or whose characters map to a tool's identifier."""
        cuts = [m.start() for m in re.finditer(r"[.\-]", written)] + [len(written)]
        for end in reversed(cuts):
            candidate = written[:end]
            binding = self._by_name.get(candidate) or self._bindings.get(
                re.sub(r"[^A-Za-z0-9_]", "_", candidate)
            )
            if binding is not None:
                return binding
        return None

    def _suggestions(self, name: str) -> str:
        idents = sorted(self._bindings)
        if not idents:
            return "; no tools are visible"
        if len(idents) <= MAX_SUGGESTIONS:
            close = difflib.get_close_matches(name, idents, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"{hint}; valid names: {', '.join(f'tools.{i}' for i in idents)}"
        close = _close(name, idents, self._by_name)
        shown = f"; close: {', '.join(f'tools.{i}' for i in close)}" if close else ""
        rest = len(idents) - len(close)
        return f"{shown}; {rest} {'more' if close else 'tools'}: use catalog.search('what it does')"

    # -- names from other runtimes ---------------------------------------------------------

    def _foreign_names(self) -> str | None:
        for node in self._nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id not in self._bound:
                binding = self._bindings.get(func.id) or self._by_name.get(func.id)
                if binding is not None and func.id not in _BUILTINS:
                    return (
                        f"line {_line(node)}: {func.id} is not defined: tools are called "
                        f"through `tools`: write tools.{binding.ident}(...)"
                    )
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in _FOREIGN_NAMESPACES
                and func.value.id not in self._bound
            ):
                binding = self._bindings.get(func.attr) or self._mapped(func.attr)
                target = f"tools.{binding.ident}" if binding else f"tools.{func.attr}"
                return (
                    f"line {_line(node)}: {func.value.id} is not defined: tools are called "
                    f"through `tools`: write {target}(...)"
                )
        return None


def _check_arguments(binding: ToolBinding, call: ast.Call) -> str | None:
    where = f"line {_line(call)}: tools.{binding.ident}()"
    if call.args:
        return f"{where} takes keyword arguments only: write {_with_keywords(binding, call)}"
    spread = any(kw.arg is None for kw in call.keywords)
    valid = binding.param_idents()
    for kw in call.keywords:
        if kw.arg is None or kw.arg in valid:
            continue
        close = near_miss(kw.arg, valid)
        if close is not None:
            # Even an open schema: a near miss would be sent as an extra key and ignored.
            return (
                f"{where} has no parameter {kw.arg!r}: did you mean {close!r}? "
                f"(parameters: {_param_list(binding)})"
            )
        if not binding.extra:
            hint = _suggest(kw.arg, set(valid))
            return (
                f"{where} has no parameter {kw.arg!r}{hint}; valid parameters: "
                f"{_param_list(binding)}"
            )
    if not spread:
        given = {kw.arg for kw in call.keywords}
        missing = [p.ident for p in binding.params if p.required and p.ident not in given]
        if missing:
            return (
                f"{where} is missing required keyword(s) {', '.join(missing)} "
                f"(parameters: {_param_list(binding)})"
            )
    return None


def _with_keywords(binding: ToolBinding, call: ast.Call) -> str:
    """The call written with keywords: positional values matched to the parameters in
    signature order (the required ones first, as the stub shows them)."""
    params = binding.param_idents()
    parts = []
    for index, arg in enumerate(call.args):
        value = _short(ast.unparse(arg))
        parts.append(f"{params[index]}={value}" if index < len(params) else value)
    parts += [f"{kw.arg}={_short(ast.unparse(kw.value))}" for kw in call.keywords if kw.arg]
    if len(call.args) > len(params):
        return f"tools.{binding.ident}({_param_list(binding)}) (it has {len(params)} parameters)"
    return f"tools.{binding.ident}({', '.join(parts)})"


def near_miss(word: str, valid: tuple[str, ...]) -> str | None:
    """A declared parameter ``word`` is a near miss of: the same letters up to case and
    underscores (``startDate`` / ``start_date``), a plural, or a close spelling."""
    norm = _normalise(word)
    for param in valid:
        other = _normalise(param)
        if norm == other or norm.rstrip("s") == other.rstrip("s"):
            return param
    close = difflib.get_close_matches(word, valid, n=1, cutoff=0.8)
    return close[0] if close else None


def _normalise(word: str) -> str:
    return word.replace("_", "").lower()


def _close(name: str, idents: list[str], by_name: dict[str, ToolBinding]) -> list[str]:
    """Up to :data:`MAX_SUGGESTIONS` identifiers spelled like ``name`` (closest first),
    then ones that contain it or its words."""
    close = difflib.get_close_matches(name, idents, n=MAX_SUGGESTIONS, cutoff=0.6)
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if len(w) > 2]
    for ident in idents:
        if len(close) >= MAX_SUGGESTIONS:
            break
        if ident not in close and words and all(w in ident.lower() for w in words):
            close.append(ident)
    return close


def _as_python(written: str) -> str:
    """How Python reads ``tools.<written>``: dashes are minus signs, dots attributes."""
    spaced = written.replace("-", " - ")
    return f"`tools.{spaced}`"


def _usage(name: str) -> str:
    return {
        "tools": "tools.<name>(...)",
        "catalog": "catalog.search(...), catalog.describe(...)",
        "parallel": "parallel(lambda: tools.a(...), ...)",
        "ToolCallError": "except ToolCallError as e",
    }[name]


def _bound_names(nodes: list[ast.AST]) -> set[str]:
    """Every name the program binds anywhere (assignment, def, class, import, parameter,
    for, with, except, global...) among ``nodes``, all of its tree: such a name is the
    program's own."""
    bound: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
    return bound


def _is_tools_attribute(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "tools"
    )


def _suggest(name: str, valid: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _param_list(binding: ToolBinding) -> str:
    if not binding.params:
        return "none"
    return ", ".join(p.ident + ("" if p.required else "=...") for p in binding.params)


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _line(node: ast.AST) -> int:
    return max(getattr(node, "lineno", 1), 1)
