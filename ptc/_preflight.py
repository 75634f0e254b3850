"""Pre-flight checks on a program before any worker starts.

Only what is *certainly* wrong fails here: a syntax error, a ``tools.X`` that names no
visible tool, a keyword argument no parameter of that tool accepts, or (``restricted``
profile) a construct RestrictedPython refuses to compile. Anything dynamic is left to run
time, where the SDK raises the same errors. Syntax and policy are judged by the worker's
own :func:`worker.parse_program` / :func:`worker.compile_program`, so a program fails here
exactly as it would fail in the child, with the same detail and the user's line numbers.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from typing import Literal

from sdkgen import Sdk, ToolBinding
from worker import CompileFailure, compile_program, parse_program

PreflightKind = Literal["syntax", "preflight", "policy"]


@dataclass(frozen=True, kw_only=True)
class PreflightError:
    kind: PreflightKind
    detail: str


def check_program(code: str, sdk: Sdk, profile: str) -> PreflightError | None:
    """Return the first certain error in ``code``, or ``None`` when it may run."""
    tree = parse_program(code)
    if isinstance(tree, CompileFailure):
        return PreflightError(kind=tree.kind, detail=tree.detail)
    problem = _check_tool_uses(tree, sdk)
    if problem is not None:
        return PreflightError(kind="preflight", detail=problem)
    # What only compiling finds: `break` outside a loop, say, or the restricted policy
    # (last: the policy rewrites the tree).
    compiled = compile_program(code, profile=profile, tree=tree)
    if isinstance(compiled, CompileFailure):
        return PreflightError(kind=compiled.kind, detail=compiled.detail)
    return None


def _check_tool_uses(tree: ast.AST, sdk: Sdk) -> str | None:
    if _rebinds(tree, "tools"):
        return None  # `tools` is no longer the SDK namespace: nothing is certain
    bindings = sdk.by_ident()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = _called_tool(node.func)
        if target is None:
            continue
        ident, via_map = target
        binding = bindings.get(ident)
        if binding is None:
            return _unknown_tool(ident, bindings, node)
        if not via_map:
            problem = _check_keywords(binding, node)
            if problem is not None:
                return problem
    # A bare attribute (`f = tools.nope`) is as certainly wrong as a call.
    for node in ast.walk(tree):
        if _is_tools_attribute(node):
            assert isinstance(node, ast.Attribute)
            if node.attr not in bindings:
                return _unknown_tool(node.attr, bindings, node)
    return None


def _called_tool(func: ast.expr) -> tuple[str, bool] | None:
    if _is_tools_attribute(func):
        assert isinstance(func, ast.Attribute)
        return func.attr, False
    if isinstance(func, ast.Attribute) and func.attr == "map" and _is_tools_attribute(func.value):
        assert isinstance(func.value, ast.Attribute)
        return func.value.attr, True
    return None


def _is_tools_attribute(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "tools"
    )


def _rebinds(tree: ast.AST, name: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.arg) and node.arg == name:
            return True
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name) == name:
            return True
        if isinstance(node, ast.Global | ast.Nonlocal) and name in node.names:
            return True
    return False


def _check_keywords(binding: ToolBinding, call: ast.Call) -> str | None:
    if call.args:
        return (
            f"line {_line(call)}: tools.{binding.ident}() takes keyword arguments only "
            f"({_param_list(binding)})"
        )
    if binding.extra or any(kw.arg is None for kw in call.keywords):
        return None  # an open input schema, or `**kwargs`: any key may be accepted
    valid = set(binding.param_idents())
    for kw in call.keywords:
        if kw.arg not in valid:
            hint = _suggest(kw.arg or "", valid)
            return (
                f"line {_line(call)}: tools.{binding.ident}() has no parameter "
                f"{kw.arg!r}{hint}; valid parameters: {_param_list(binding)}"
            )
    return None


def _unknown_tool(ident: str, bindings: dict[str, ToolBinding], node: ast.AST) -> str:
    names = sorted(bindings)
    hint = _suggest(ident, set(names))
    valid = ", ".join(f"tools.{n}" for n in names) or "(none: no tools are visible)"
    return f"line {_line(node)}: tools.{ident} does not exist{hint}; valid names: {valid}"


def _suggest(name: str, valid: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _param_list(binding: ToolBinding) -> str:
    if not binding.params:
        return "none"
    return ", ".join(p.ident + ("" if p.required else "=...") for p in binding.params)


def _line(node: ast.AST) -> int:
    return max(getattr(node, "lineno", 1), 1)
