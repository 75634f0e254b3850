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
