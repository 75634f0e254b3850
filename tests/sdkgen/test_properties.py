"""Properties: any Unicode tool names and property keys give a valid, importable SDK whose
calls round-trip the original names and keys."""

from __future__ import annotations

import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sdkgen

from .fake_transport import FakeTransport, load_module

# Any code point, lone surrogates and NUL included.
names = st.text(st.characters(exclude_categories=()), max_size=12)
tool_sets = st.dictionaries(
    names,
    st.tuples(
        st.sets(names, max_size=5), st.text(st.characters(exclude_categories=()), max_size=40)
    ),
    min_size=1,
    max_size=4,
)


def _specs(drawn: dict[str, tuple[set[str], str]]) -> list[sdkgen.ToolSpec]:
    return [
        sdkgen.ToolSpec(
            name=name,
            description=description,
            input_schema={
                "type": "object",
                "properties": {key: {"type": "string", "description": key} for key in keys},
                "required": sorted(keys)[:1],
            },
        )
        for name, (keys, description) in drawn.items()
    ]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool_sets)
def test_arbitrary_names_round_trip_through_the_module(
    drawn: dict[str, tuple[set[str], str]],
) -> None:
    sdk = sdkgen.SdkGenerator().generate(_specs(drawn))
    ast.parse(sdk.stub)
    transport = FakeTransport()
    ns = load_module(sdk, transport)
    assert sorted(b.name for b in sdk.tools) == sorted(drawn)
    for binding in sdk.tools:
        assert binding.ident.isidentifier()
        kwargs = {p.ident: f"value of {p.key}" for p in binding.params}
        getattr(ns["tools"], binding.ident)(**kwargs)
        sent_name, sent_args = transport.batches[-1][0]
        assert sent_name == binding.name
        assert sent_args == {key: f"value of {key}" for key in drawn[binding.name][0]}


# Text that tries to end a string literal early: quotes, backslashes, line breaks of every
# kind, then anything at all.
hostile_text = st.lists(
    st.one_of(
        st.sampled_from(['"', '"""', "\\", "'", "\n", "\r", "\u2028", "\x00", " ", "x"]),
        st.characters(exclude_categories=()),
    ),
    max_size=20,
).map("".join)


def _docstrings(stub: str) -> dict[str, str]:
    """Tool ident -> the docstring of its method in ``class tools``, as Python reads it."""
    tools = next(
        node
        for node in ast.parse(stub).body
        if isinstance(node, ast.ClassDef) and node.name == "tools"
    )
    return {
        node.name: ast.get_docstring(node, clean=False) or ""
        for node in tools.body
        if isinstance(node, ast.FunctionDef)
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(description=hostile_text, parameter_doc=hostile_text)
def test_no_description_breaks_the_stub_and_each_reads_back_as_written(
    description: str, parameter_doc: str
) -> None:
    spec = sdkgen.ToolSpec(
        name="tool",
        description=description,
        input_schema={
            "type": "object",
            "properties": {"q": {"type": "string", "description": parameter_doc}},
        },
    )
    sdk = sdkgen.SdkGenerator().generate([spec])
    compile(sdk.stub, "<stub>", "exec")  # a SyntaxError here is the bug
    doc = _docstrings(sdk.stub)["tool"]
    lines = [line.rstrip() for line in description.strip().splitlines()]
    if lines:  # the first line as written, each later one indented as written
        first, *rest = doc.split("\n")
        assert first == lines[0]
        assert [line.removeprefix("        ") for line in rest[: len(lines) - 1]] == lines[1:]
