"""What a type fragment read back from the disk cache may contain.

The cache directory is outside the process: a fragment file may have been edited into
valid JSON that says something else. Its annotations go into the signatures of the worker
module (which runs in every child) and its definitions into the stub the model reads, so a
loaded fragment is accepted only when it has exactly the shape generation produces:

- every annotation (parameters, return) is a *pure type expression*: names, dotted names,
  subscripts, ``|`` unions, constants (``Literal`` values, forward references), and lists
  and tuples only inside a subscript; nothing that calls, binds or runs anything;
- every definition is one statement that binds one of the fragment's own type names: a
  ``TypedDict`` class (bases are names, the only keyword ``total=<bool>``, a body of a
  docstring, annotated fields and ``...``), a functional ``TypedDict(...)`` assignment,
  or a ``TypeAlias``;
- names, typing imports and notes are strings of the expected kinds.

:func:`checked_fragment` returns the :class:`TypeFragment` or ``None`` (regenerate).
"""

from __future__ import annotations

import ast
import keyword
import typing

from ._ast_parse import parse
from ._fragment import TypeFragment

_TYPING_NAMES = frozenset(name for name in dir(typing) if not name.startswith("_"))
_CONSTANT_TYPES = (str, int, float, bool, type(None), type(...))


def checked_fragment(data: object) -> TypeFragment | None:
    """The fragment ``data`` (decoded JSON) describes, or ``None`` when it is not exactly
    what generation produces."""
    try:
        return _checked(data)
    except (_Rejected, SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


class _Rejected(Exception):
    pass


def _require(ok: bool) -> None:
    if not ok:
        raise _Rejected


def _strings(value: object) -> tuple[str, ...]:
    _require(isinstance(value, list) and all(type(v) is str for v in value))
    assert isinstance(value, list)
    return tuple(value)


def _checked(data: object) -> TypeFragment:
    _require(isinstance(data, dict))
    assert isinstance(data, dict)
    _require(
        set(data) == {"definitions", "type_names", "typing_names", "params", "returns", "notes"}
    )
    type_names = _strings(data["type_names"])
    _require(all(_identifier(n) for n in type_names) and len(set(type_names)) == len(type_names))
    typing_names = _strings(data["typing_names"])
    _require(all(n in _TYPING_NAMES for n in typing_names))
    definitions = _strings(data["definitions"])
    bound = [_definition(source) for source in definitions]
    _require(sorted(bound) == sorted(type_names))
    params = data["params"]
    _require(isinstance(params, list))
    checked_params: list[tuple[str, str, bool]] = []
    for param in params:
        _require(isinstance(param, list) and len(param) == 3)
        key, annotation, required = param
        _require(type(key) is str and type(annotation) is str and type(required) is bool)
        _annotation(annotation)
        checked_params.append((key, annotation, required))
    returns = data["returns"]
    _require(type(returns) is str)
    _annotation(returns)
    return TypeFragment(
        definitions=definitions,
        type_names=type_names,
        typing_names=typing_names,
        params=tuple(checked_params),
        returns=returns,
        notes=_strings(data["notes"]),
    )


def _identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


# --- type expressions ------------------------------------------------------------------


def _annotation(text: str) -> None:
    """A pure type expression that stays one annotation where a signature embeds it."""
    _require("\n" not in text and "\r" not in text)
    _type_expression(parse(text, mode="eval").body, top=True)
    embedded = parse(f"def f(*, x: {text}) -> {text}: ...").body
    _require(len(embedded) == 1 and isinstance(embedded[0], ast.FunctionDef))
    function = embedded[0]
    assert isinstance(function, ast.FunctionDef)
    arguments = function.args
    _require(
        not arguments.args
        and not arguments.posonlyargs
        and len(arguments.kwonlyargs) == 1
        and arguments.kw_defaults == [None]
        and arguments.vararg is None
        and arguments.kwarg is None
        and not function.decorator_list
    )


def _type_expression(node: ast.expr, *, top: bool = False) -> None:
    if isinstance(node, ast.Name):
        _require(isinstance(node.ctx, ast.Load) and _identifier(node.id))
    elif isinstance(node, ast.Attribute):
        _require(isinstance(node.ctx, ast.Load) and _identifier(node.attr))
        _type_expression(node.value)
    elif isinstance(node, ast.Constant):
        _require(isinstance(node.value, _CONSTANT_TYPES))
    elif isinstance(node, ast.UnaryOp):  # Literal[-1]
        _require(
            isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) in (int, float)
        )
    elif isinstance(node, ast.BinOp):
        _require(isinstance(node.op, ast.BitOr))
        _type_expression(node.left)
        _type_expression(node.right)
    elif isinstance(node, ast.Subscript):
        _require(isinstance(node.ctx, ast.Load))
        _type_expression(node.value)
        _slice(node.slice)
    elif isinstance(node, ast.List) and not top:  # Callable[[...], ...]
        for element in node.elts:
            _type_expression(element)
    else:
        raise _Rejected


def _slice(node: ast.expr) -> None:
    if isinstance(node, ast.Tuple):
        for element in node.elts:
            _type_expression(element)
    else:
        _type_expression(node)


# --- definitions -------------------------------------------------------------------------


def _definition(source: str) -> str:
    """The name one definition binds; ``_Rejected`` unless it is a TypedDict or an alias."""
    body = parse(source).body
    _require(len(body) == 1)
    stmt = body[0]
    if isinstance(stmt, ast.ClassDef):
        return _typeddict_class(stmt)
    if isinstance(stmt, ast.AnnAssign):  # Name: TypeAlias = <type>
        _require(
            isinstance(stmt.target, ast.Name)
            and isinstance(stmt.annotation, ast.Name)
            and stmt.annotation.id == "TypeAlias"
            and stmt.value is not None
            and stmt.simple == 1
        )
        assert isinstance(stmt.target, ast.Name) and stmt.value is not None
        _type_expression(stmt.value, top=True)
        return stmt.target.id
    if isinstance(stmt, ast.Assign):  # Name = TypedDict("Name", {...}, total=False)
        _require(len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name))
        target = stmt.targets[0]
        assert isinstance(target, ast.Name)
        _functional_typeddict(stmt.value, target.id)
        return target.id
    raise _Rejected


def _total_keywords(keywords: list[ast.keyword]) -> None:
    for item in keywords:
        _require(
            item.arg == "total"
            and isinstance(item.value, ast.Constant)
            and type(item.value.value) is bool
        )


def _typeddict_class(stmt: ast.ClassDef) -> str:
    _require(_identifier(stmt.name) and not stmt.decorator_list and bool(stmt.bases))
    _require(all(isinstance(b, ast.Name) and _identifier(b.id) for b in stmt.bases))
    _require(any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in stmt.bases))
    _total_keywords(stmt.keywords)
    for item in stmt.body:
        if isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant):
            _require(isinstance(item.value.value, str) or item.value.value is ...)
        elif isinstance(item, ast.AnnAssign):
            _require(isinstance(item.target, ast.Name) and item.value is None and item.simple == 1)
            _type_expression(item.annotation, top=True)
        else:
            raise _Rejected
    return stmt.name


def _functional_typeddict(value: ast.expr, name: str) -> None:
    _require(
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "TypedDict"
        and len(value.args) == 2
    )
    assert isinstance(value, ast.Call)
    title, fields = value.args
    _require(isinstance(title, ast.Constant) and title.value == name)
    _require(isinstance(fields, ast.Dict))
    assert isinstance(fields, ast.Dict)
    for key, field_type in zip(fields.keys, fields.values, strict=True):
        _require(isinstance(key, ast.Constant) and type(key.value) is str)
        _type_expression(field_type, top=True)
    _total_keywords(value.keywords)
