"""The restricted profile at compile time: RestrictedPython's transformer, widened.

RestrictedPython rewrites a program so every attribute read, item read and write goes
through a guard (``_getattr_``, ``_getitem_``, ``_write_``), and refuses what it cannot
guard. This subclass keeps that and lets through what ordinary Python needs and the
run-time guards (``_guards``) can police:

- names starting with ``_`` (``_cache``, ``_count``): allowed, except dunders and the
  runtime's own names (``_getattr_``, ``_print``: a ``_`` name that ends in ``_`` is
  reserved), whose rebinding would replace a guard;
- attributes starting with ``_``: reads of the dunders in ``READABLE_DUNDERS`` and
  ``SPECIAL_METHODS``, and of private names, which the guard allows only on the program's
  own objects; private writes go through ``_write_private_`` (program objects only);
  dunder writes are refused. ``self.__x`` in a class is name-mangled as CPython does;
- special methods (``SPECIAL_METHODS``: ``__init__``, ``__eq__``, ``__iter__``,
  ``__enter__``, ...) may be defined (``def``, or ``__hash__ = None`` in a class body) and
  set on the program's classes (``cls.__init__ = init``, through ``_write_special_``);
- ``obj.x += 1`` and ``d[k] += 1``: the target is read through the guards and written
  through ``_write_`` (``_augattr_``/``_augitem_``), in CPython's order of evaluation;
- annotated assignments, ``nonlocal``, ``async def``/``await``/``async for``/``async
  with`` (the awaited values are guarded like any other; see ``_guards`` for coroutines);
- calls with ``*args``/``**kwargs`` are left as calls (RestrictedPython routes them
  through ``_apply_``, which only calls the function and puts its own name in errors);
- tuple unpacking takes at most one item more than it needs (``a, b = itertools.count()``
  raises ``ValueError`` instead of filling memory).

Still refused: ``match``, ``try``/``except*``, ``eval``/``exec``, ``metaclass=``, star
imports, dunder names as variables (but ``__name__``/``__doc__`` may be read).
"""

from __future__ import annotations

import ast
from typing import Any

from RestrictedPython.transformer import (
    FORBIDDEN_FUNC_NAMES,
    INSPECT_ATTRIBUTES,
    IOPERATOR_TO_STR,
    RestrictingNodeTransformer,
    copy_locations,
)

from ._classes import (
    BINDABLE_DUNDERS,
    READABLE_DUNDERS,
    SPECIAL_METHODS,
    WRITE_DUNDERS,
    is_dunder,
)

_CLASS_NAMES = frozenset({"__name__", "__qualname__", "__module__"})
"""Dunder names a class body may also bind (``__name__ = 'bar'``: a class attribute)."""
_READABLE_NAMES = frozenset({"__name__", "__doc__", "__class__"})
"""Dunder *names* a program may read (``__class__``: the implicit cell of a method)."""

_RESERVED = frozenset({"_print", "printed"})


def _reserved(name: str) -> bool:
    """A ``_`` name of the runtime's (``_getattr_``, ``_print``), never a program's."""
    return name in _RESERVED or (name.startswith("_") and name.endswith("_") and name != "_")


class RestrictedPolicy(RestrictingNodeTransformer):
    """RestrictedPython's transformer with ptc's changes (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._classes: list[str] = []  # enclosing class names, for name mangling
        self._scopes: list[str] = []  # "class" or "function", innermost last
        self._lazy_annotations = False  # `from __future__ import annotations`

    # --- names ---------------------------------------------------------------------

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        if name is None or name == "_":
            return
        if is_dunder(name):
            in_class_body = bool(self._scopes) and self._scopes[-1] == "class"
            if name not in BINDABLE_DUNDERS and not (in_class_body and name in _CLASS_NAMES):
                self.error(node, f'"{name}" is a dunder name, which the restricted profile refuses')
        elif _reserved(name):
            self.error(node, f'"{name}" is reserved for the runtime (a "_" name ending in "_")')
        elif name.endswith("__roles__") or name in FORBIDDEN_FUNC_NAMES:
            super().check_name(node, name, allow_magic_methods)

    def visit_Name(self, node: ast.Name) -> Any:
        if isinstance(node.ctx, ast.Load) and node.id in _READABLE_NAMES:
            return node
        return super().visit_Name(node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> Any:
        for name in node.names:
            self.check_name(node, name)
        return node

    # --- attributes ----------------------------------------------------------------

    def _mangled(self, attr: str) -> str:
        if not self._classes or not attr.startswith("__") or attr.endswith("__"):
            return attr
        owner = self._classes[-1].lstrip("_")
        return f"_{owner}{attr}" if owner else attr

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        attr = node.attr = self._mangled(node.attr)
        if attr in INSPECT_ATTRIBUTES or attr.endswith("__roles__"):
            self.error(node, f'"{attr}" is an attribute the restricted profile refuses')
            return node
        if is_dunder(attr):
            if not isinstance(node.ctx, ast.Load):
                if attr not in SPECIAL_METHODS:
                    self.error(node, f'writing or deleting "{attr}" is not allowed')
                    return node
                return self._guard_store(node, "_write_special_")
            if attr not in READABLE_DUNDERS | WRITE_DUNDERS:
                self.error(node, f'"{attr}" is an attribute the restricted profile refuses')
                return node
        elif attr.startswith("_") and attr != "_" and not isinstance(node.ctx, ast.Load):
            return self._guard_store(node, "_write_private_")
        # RestrictedPython's own rewriting, without its "no _ attribute" rule.
        original, node.attr = attr, "x"
        new = super().visit_Attribute(node)
        if isinstance(new, ast.Call):
            new.args[1] = ast.Constant(original)
        elif isinstance(new, ast.Attribute):
            new.attr = original
        return new

    def _guard_store(self, node: ast.Attribute, guard: str) -> ast.Attribute:
        """``obj.name = v`` -> ``guard(obj).name = v`` (a guard that knows the kind of name)."""
        node = self.node_contents_visit(node)
        guarded = ast.Call(func=ast.Name(guard, ast.Load()), args=[node.value], keywords=[])
        copy_locations(guarded, node.value)
        node.value = guarded
        return node

    # --- definitions ---------------------------------------------------------------

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        self._classes.append(node.name)
        self._scopes.append("class")
        try:
            return super().visit_ClassDef(node)
        finally:
            self._classes.pop()
            self._scopes.pop()

    def _in_function(self, visit: Any, node: Any) -> Any:
        self._scopes.append("function")
        try:
            return visit(self, node)
        finally:
            self._scopes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        return self._lazy(
            node, lambda: self._in_function(RestrictingNodeTransformer.visit_FunctionDef, node)
        )

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        return self._in_function(RestrictingNodeTransformer.visit_Lambda, node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        return self._lazy(
            node, lambda: self._in_function(RestrictingNodeTransformer.visit_FunctionDef, node)
        )

    # --- annotations -----------------------------------------------------------------
    # With `from __future__ import annotations` an annotation is kept as its source text
    # and never evaluated: it is left as written (rewritten, its text would be the
    # guards' calls). Without it, it is evaluated like any expression, so guarded.

    def visit_Module(self, node: ast.Module) -> Any:
        self._lazy_annotations = any(
            isinstance(s, ast.ImportFrom)
            and s.module == "__future__"
            and any(a.name == "annotations" for a in s.names)
            for s in node.body
        )
        return super().visit_Module(node)

    def visit_arg(self, node: ast.arg) -> Any:
        return node if self._lazy_annotations else super().visit_arg(node)

    def _lazy(self, node: Any, visit: Any) -> Any:
        returns = getattr(node, "returns", None)
        if self._lazy_annotations and returns is not None:
            node.returns = None
            visited = visit()
            visited.returns = returns
            return visited
        return visit()

    # --- statements ----------------------------------------------------------------

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        if self._lazy_annotations:
            node.target = self.visit(node.target)
            if node.value is not None:
                node.value = self.visit(node.value)
            return node
        return self.node_contents_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        target = node.target
        if isinstance(target, ast.Name):
            return super().visit_AugAssign(node)
        op = IOPERATOR_TO_STR[type(node.op)]
        if isinstance(target, ast.Attribute):
            attr = self._mangled(target.attr)
            if attr in INSPECT_ATTRIBUTES or is_dunder(attr):
                self.error(node, f'augmented assignment to "{attr}" is not allowed')
                return node
            helper, subject = "_augattr_", [self.visit(target.value), ast.Constant(attr)]
        else:
            assert isinstance(target, ast.Subscript)
            helper, subject = "_augitem_", [self.visit(target.value), self._key(target.slice)]
        pending = ast.Call(func=ast.Name(helper, ast.Load()), args=subject, keywords=[])
        # `_augattr_(obj, "x").apply("+=", v)`: obj and obj.x are evaluated before v, as
        # CPython does; the write goes through the write guard.
        apply = ast.Attribute(value=pending, attr="apply", ctx=ast.Load())
        call = ast.Call(func=apply, args=[ast.Constant(op), self.visit(node.value)], keywords=[])
        statement = ast.Expr(value=call)
        copy_locations(statement, node)
        return ast.fix_missing_locations(statement)

    def _key(self, key: ast.expr) -> ast.expr:
        if isinstance(key, ast.Slice):
            parts = [
                self.visit(p) if p is not None else ast.Constant(None)
                for p in (key.lower, key.upper, key.step)
            ]
            return ast.Call(func=ast.Name("slice", ast.Load()), args=parts, keywords=[])
        visited: ast.expr = self.visit(key)
        return visited

    def visit_Call(self, node: ast.Call) -> Any:
        if isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval"):
            self.error(node, f"{node.func.id.capitalize()} calls are not allowed.")
        return self.node_contents_visit(node)

    def visit_Await(self, node: ast.Await) -> Any:
        return self.node_contents_visit(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> Any:
        return self.node_contents_visit(node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> Any:
        return self.visit_With(node)  # type: ignore[arg-type]

    def visit_comprehension(self, node: ast.comprehension) -> Any:
        if node.is_async:  # `async for` in a comprehension takes an async iterable
            return self.node_contents_visit(node)
        return super().visit_comprehension(node)

    def gen_unpack_spec(self, tpl: ast.Tuple) -> ast.Dict:
        spec = super().gen_unpack_spec(tpl)
        spec.keys.append(ast.Constant("starred"))
        spec.values.append(ast.Constant(any(isinstance(e, ast.Starred) for e in tpl.elts)))
        return spec


def apply_policy(tree: ast.Module) -> list[str]:
    """Rewrite ``tree`` in place with the profile's transformer; return its errors."""
    errors: list[str] = []
    warnings: list[str] = []
    used_names: dict[str, bool] = {}
    RestrictedPolicy(errors, warnings, used_names).visit(tree)
    return errors
