"""The generator's type definitions as AST: what they bind and reference, the fields of a
TypedDict, and the edits that fit them into a stub.

Edits work in place on a ``{name: statement}`` mapping in the generator's order: every name
gets the tool's prefix (fragments of different tools never clash), ``closed`` /
``extra_items`` keywords are dropped (recording which TypedDicts are open), a field-less
TypedDict becomes a mapping alias, and inputs that may be open objects also accept any JSON
object.
"""

from __future__ import annotations

import ast
import typing

from ._ast_parse import parse
from ._fragment import JSON_ALIAS

TYPING_OK = frozenset(name for name in dir(typing) if not name.startswith("_"))
"""Names every stub defines or imports itself; a fragment may not redefine them."""


def bound_name(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.ClassDef):
        return stmt.name
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    return None


def class_fields(stmt: ast.ClassDef) -> list[ast.AnnAssign]:
    return [s for s in stmt.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


def typeddict_fields(
    stmt: ast.stmt, defs: dict[str, ast.stmt]
) -> list[tuple[str, ast.expr]] | None:
    if isinstance(stmt, ast.ClassDef):
        fields: list[tuple[str, ast.expr]] = []
        for base in stmt.bases:
            if isinstance(base, ast.Name) and base.id != "TypedDict":
                inherited = defs.get(base.id)
                sub = typeddict_fields(inherited, defs) if inherited is not None else None
                if sub is None:
                    return None
                fields.extend(sub)
        total = all(
            not (k.arg == "total" and isinstance(k.value, ast.Constant) and k.value.value is False)
            for k in stmt.keywords
        )
        for field in class_fields(stmt):
            assert isinstance(field.target, ast.Name)
            ann = field.annotation
            if not total:
                ann = ast.Subscript(value=ast.Name(id="NotRequired"), slice=ann)
            fields.append((field.target.id, ann))
        return fields
    if (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and len(stmt.value.args) == 2
        and isinstance(stmt.value.args[1], ast.Dict)
    ):
        result = []
        for key, value in zip(stmt.value.args[1].keys, stmt.value.args[1].values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return None
            result.append((key.value, value))
        return result
    return None


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def reachable(annotations: list[str], defs: dict[str, ast.stmt]) -> set[str]:
    todo = set().union(*(names_in(parse(a, mode="eval")) for a in annotations))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        todo |= names_in(defs[name])
    return seen


def typing_refs(stmt: ast.stmt) -> set[str]:
    return {n for n in names_in(stmt) if n in TYPING_OK}


def used_names(sources: tuple[str, ...]) -> set[str]:
    used: set[str] = set()
    for source in sources:
        used |= names_in(parse(source))
    return used


def prefix_names(defs: dict[str, ast.stmt], prefix: str) -> None:
    """Give every definition the tool's prefix so fragments of different tools never clash
    (``$defs``/``allOf`` models may come out unprefixed)."""
    renames = {n: prefix + n for n in defs if not n.startswith(prefix)}
    if not renames:
        return
    for stmt in defs.values():
        if isinstance(stmt, ast.ClassDef):
            stmt.name = renames.get(stmt.name, stmt.name)
            # Field names are keys, not references: rename only inside annotations/bases.
            roots: list[ast.AST] = [*stmt.bases, *(f.annotation for f in class_fields(stmt))]
        else:
            roots = [stmt]
        for node in (n for root in roots for n in ast.walk(root)):
            if isinstance(node, ast.Name) and node.id in renames:
                node.id = renames[node.id]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "TypedDict"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in renames
            ):
                node.args[0].value = renames[node.args[0].value]


def open_typeddicts(defs: dict[str, ast.stmt]) -> set[str]:
    """TypedDicts whose object schema accepts other keys. The generator marks the others
    ``closed=True`` and typed extra keys ``extra_items=...`` (PEP 728, which mypy does not
    read yet): both keywords are dropped here."""
    opened = set()
    for name, stmt in defs.items():
        if isinstance(stmt, ast.ClassDef):
            keywords = stmt.keywords
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            keywords = stmt.value.keywords
        else:
            continue
        closed = any(
            k.arg == "closed" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in keywords
        )
        keywords[:] = [k for k in keywords if k.arg not in ("closed", "extra_items")]
        if not closed:
            opened.add(name)
    return opened


def empty_typeddicts_to_mappings(defs: dict[str, ast.stmt], typing_names: set[str]) -> None:
    """A TypedDict without fields would only admit ``{}``; an open object is a mapping."""
    for name, stmt in list(defs.items()):
        if isinstance(stmt, ast.ClassDef) and not class_fields(stmt) and not stmt.bases[1:]:
            defs[name] = parse(f"{name}: TypeAlias = dict[str, {JSON_ALIAS}]").body[0]
            typing_names.add("TypeAlias")


def widen_inputs(
    defs: dict[str, ast.stmt],
    params: tuple[tuple[str, str, bool], ...],
    returns: str,
    opened: set[str],
) -> tuple[tuple[str, str, bool], ...]:
    """Where an argument may be an open object, accept any JSON object too (``T | dict[str,
    JSON]``): a TypedDict would make a type checker reject keys the host accepts. Types that
    outputs use as well are left as they are (reading a value stays typed)."""
    if not opened:
        return params
    inputs = reachable([a for _, a, _ in params], defs)
    only_inputs = inputs - reachable([returns], defs)
    widen = _Widen(opened)
    for name in only_inputs:
        stmt = defs[name]
        if isinstance(stmt, ast.ClassDef):
            for field in class_fields(stmt):
                field.annotation = widen.visit(field.annotation)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            call = stmt.value
            if isinstance(call, ast.Call) and len(call.args) == 2:
                call.args[1] = widen.visit(call.args[1])  # functional TypedDict: the values
            else:
                stmt.value = widen.visit(stmt.value)
    return tuple(
        (key, ast.unparse(widen.visit(parse(annotation, mode="eval").body)), required)
        for key, annotation, required in params
    )


class _Widen(ast.NodeTransformer):
    def __init__(self, opened: set[str]) -> None:
        self.opened = opened

    def _either(self, name: str) -> ast.expr:
        mapping = parse(f"dict[str, {JSON_ALIAS}]", mode="eval").body
        return ast.BinOp(left=ast.Name(id=name, ctx=ast.Load()), op=ast.BitOr(), right=mapping)

    def visit_Name(self, node: ast.Name) -> ast.expr:  # noqa: N802 - ast.NodeTransformer API
        return self._either(node.id) if node.id in self.opened else node

    def visit_Constant(self, node: ast.Constant) -> ast.expr:  # noqa: N802
        # A quoted forward reference (a stub needs no quotes).
        if isinstance(node.value, str) and node.value in self.opened:
            return self._either(node.value)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:  # noqa: N802
        if isinstance(node.value, ast.Name) and node.value.id == "Literal":
            return node  # values, not references
        self.generic_visit(node)
        return node

    def visit_Dict(self, node: ast.Dict) -> ast.expr:  # noqa: N802
        # Functional TypedDict: keys are field names (strings), never references.
        node.values = [self.visit(v) for v in node.values]
        return node
