"""The disk cache is outside the process: a fragment file edited into valid JSON that says
something else is never used. Every loaded fragment is checked structurally (annotations
are pure type expressions, definitions only TypedDict/alias statements); a tampered or
suspicious entry is regenerated and overwritten, so the SDK is what generation makes."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sdkgen
from sdkgen._fragment_check import checked_fragment

from .cases import CASES, all_specs

Data = dict[str, Any]
INJECTED = "__import__('os').system('touch /tmp/pwned')"


def _cached(tmp_path: Path, specs: list[sdkgen.ToolSpec]) -> tuple[sdkgen.Sdk, list[Path]]:
    sdk = sdkgen.SdkGenerator(cache_dir=tmp_path).generate(specs)
    return sdk, sorted(tmp_path.glob("*.json"))


# References need the type generator, whose fragments go to the disk cache (the common
# shapes never do: sdkgen._simple_types writes them without it, and no file).
GENERATED = CASES["refs"]


def test_every_fragment_generation_makes_passes_the_check(tmp_path: Path) -> None:
    _, files = _cached(tmp_path, all_specs())
    assert files
    for path in files:
        assert checked_fragment(json.loads(path.read_text())) is not None, path.name


def _param_annotation(value: str) -> Callable[[Data], None]:
    def edit(data: Data) -> None:
        data["params"] = [[k, value, r] for k, _, r in data["params"]] or [["x", value, True]]

    return edit


def _returns(value: str) -> Callable[[Data], None]:
    def edit(data: Data) -> None:
        data["returns"] = value

    return edit


def _definition(source: str) -> Callable[[Data], None]:
    def edit(data: Data) -> None:
        data["definitions"] = [source]
        data["type_names"] = ["Evil"]

    return edit


TAMPERINGS: dict[str, Callable[[Data], None]] = {
    "call in a parameter annotation": _param_annotation(INJECTED),
    "default smuggled into a parameter": _param_annotation(f"int = {INJECTED}"),
    "signature escape": _param_annotation(f"int) -> int:\n    {INJECTED}\ndef g(*, y: int"),
    "lambda annotation": _param_annotation("lambda: 1"),
    "walrus annotation": _param_annotation("(x := 1)"),
    "top-level tuple": _param_annotation("int, y"),
    "starred": _param_annotation("*int"),
    "call in the return": _returns(INJECTED),
    "return escape": _returns(f"int:\n    {INJECTED}\n"),
    "subscript with a call": _returns(f"list[{INJECTED}]"),
    "union with a call": _returns(f"int | {INJECTED}"),
    "function definition": _definition(f"def Evil():\n    {INJECTED}"),
    "statement after a class": _definition(f"class Evil(TypedDict):\n    x: int\n{INJECTED}"),
    "method in a TypedDict": _definition(
        f"class Evil(TypedDict):\n    def f(self):\n        {INJECTED}"
    ),
    "class with a default": _definition(f"class Evil(TypedDict):\n    x: int = {INJECTED}"),
    "class keyword": _definition("class Evil(TypedDict, metaclass=type):\n    x: int"),
    "decorated class": _definition("@print\nclass Evil(TypedDict):\n    x: int"),
    "class not a TypedDict": _definition("class Evil(Exception):\n    x: int"),
    "alias to a call": _definition(f"Evil: TypeAlias = {INJECTED}"),
    "plain assignment": _definition(f"Evil = {INJECTED}"),
    "import": _definition("import os as Evil"),
    "functional TypedDict with a call": _definition(
        f"Evil = TypedDict('Evil', {{'x': {INJECTED}}})"
    ),
    "bound name not declared": lambda data: data.update(
        definitions=["class Other(TypedDict):\n    x: int\n"], type_names=["Evil"]
    ),
    "unknown typing import": lambda data: data.update(typing_names=["os"]),
    "truthy string for required": lambda data: data.update(params=[["x", "int", "yes"]]),
    "extra field": lambda data: data.update(extra=1),
    "missing field": lambda data: data.pop("notes"),
    "not an object": lambda data: data.clear(),
}


@pytest.mark.parametrize("name", sorted(TAMPERINGS))
def test_a_tampered_but_valid_json_fragment_is_regenerated(tmp_path: Path, name: str) -> None:
    specs = GENERATED
    expected, files = _cached(tmp_path, specs)
    assert files
    for path in files:
        data = json.loads(path.read_text())
        TAMPERINGS[name](data)
        assert checked_fragment(data) is None
        path.write_text(json.dumps(data))
    again = sdkgen.SdkGenerator(cache_dir=tmp_path).generate(specs)
    assert again == expected
    assert "__import__" not in again.module and "__import__" not in again.stub
    for path in files:  # overwritten with what generation makes
        assert checked_fragment(json.loads(path.read_text())) is not None


def test_a_fragment_that_passes_is_used_as_it_is(tmp_path: Path) -> None:
    """The check is structural, not a second generator: a well-formed edit is taken (the
    cache directory is the user's own; what it must never do is smuggle in code)."""
    specs = GENERATED
    _, files = _cached(tmp_path, specs)
    assert files
    for path in files:
        data = json.loads(path.read_text())
        data["returns"] = "list[int] | None"
        path.write_text(json.dumps(data))
    sdk = sdkgen.SdkGenerator(cache_dir=tmp_path).generate(specs)
    assert "-> list[int] | None:" in sdk.stub


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_no_annotation_text_that_passes_can_leave_its_annotation(text: str) -> None:
    data = {
        "definitions": [],
        "type_names": [],
        "typing_names": [],
        "params": [["x", text, True]],
        "returns": "int",
        "notes": [],
    }
    fragment = checked_fragment(data)
    if fragment is not None:
        source = f"def f(*, x: {text}) -> int: ..."
        (function,) = ast.parse(source).body
        assert isinstance(function, ast.FunctionDef)
        assert [a.arg for a in function.args.kwonlyargs] == ["x"]
        assert not any(isinstance(node, ast.Call) for node in ast.walk(function))
