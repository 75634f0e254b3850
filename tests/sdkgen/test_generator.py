"""SdkGenerator: ordering, stability, one source for stub and module, caching, size, CLI."""

from __future__ import annotations

import ast
import hashlib
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import sdkgen
from sdkgen import _generator, _ir
from sdkgen.__main__ import load_specs, main

from .cases import CASES, all_specs

FIXTURE = Path(__file__).parent / "fixtures" / "tools50.json"


def _no_generation(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("datamodel-code-generator was called on a warm cache")


def _signatures(source: str) -> dict[str, str]:
    """``ident -> def line`` of every ``@_tool`` function (in ``class tools`` in the stub, at
    module level in the worker module), body, decorator and annotations removed (the module
    has none: they would never be evaluated)."""
    tree = ast.parse(source)
    cls = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "tools"]
    out = {}
    for fn in (cls[0].body if cls else []) + tree.body:
        if isinstance(fn, ast.FunctionDef) and [ast.unparse(d) for d in fn.decorator_list] == [
            "_tool"
        ]:
            fn.body, fn.decorator_list, fn.returns = [ast.Pass()], [], None
            for arg in (*fn.args.kwonlyargs, *fn.args.args, fn.args.kwarg, fn.args.vararg):
                if arg is not None:
                    arg.annotation = None
            out[fn.name] = ast.unparse(fn)
    return out


def test_stub_and_module_signatures_are_identical() -> None:
    sdk = sdkgen.generate(all_specs())
    stub, module = _signatures(sdk.stub), _signatures(sdk.module)
    assert stub == module
    assert list(stub) == [t.ident for t in sdk.tools]


def test_output_is_sorted_by_tool_name_and_byte_stable() -> None:
    specs = all_specs()
    first = sdkgen.SdkGenerator().generate(specs, header="h")
    second = sdkgen.SdkGenerator().generate(list(reversed(specs)), header="h")
    assert (first.stub, first.module, first.digest) == (second.stub, second.module, second.digest)
    assert [t.name for t in first.tools] == sorted(s.name for s in specs)
    assert first.digest == hashlib.sha256((first.stub + first.module).encode()).hexdigest()


def test_header_lines_become_comments_at_the_top() -> None:
    sdk = sdkgen.generate(CASES["zero_args"], header="Line one\nLine two")
    assert sdk.stub.startswith("# Line one\n# Line two\n")
    ast.parse(sdk.stub)


def test_bindings_map_idents_back_to_names_keys_and_required_flags() -> None:
    sdk = sdkgen.generate(CASES["non_identifier_keys"] + CASES["reserved"])
    by_ident = sdk.by_ident()
    weather = by_ident["get_weather_v2"]
    assert weather.name == "get-weather.v2"
    assert {(p.ident, p.key, p.required) for p in weather.params} == {
        ("my_city_2", "my-city", True),
        ("p_2fa", "2fa", False),
        ("my_city", "my_city", False),
    }
    assert by_ident["class_"].param_idents() == ("from_", "import_", "filter")
    assert by_ident["tools__2"].name == "tools"


def test_duplicate_tool_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        sdkgen.generate([sdkgen.ToolSpec(name="a"), sdkgen.ToolSpec(name="a")])


def test_unsupported_schemas_fall_back_to_json_and_say_so() -> None:
    sdk = sdkgen.generate(CASES["unsupported"])
    assert "# odd: input schema not supported" in sdk.stub
    assert "def odd(*, x: JSON = ..., **extra: JSON) -> JSON:" in sdk.stub


@pytest.mark.parametrize(
    "output", [None, {}, True, {"description": "Anything.", "title": "Result"}]
)
def test_an_output_that_allows_any_value_is_the_shared_json_alias(output: Any) -> None:
    sdk = sdkgen.generate([sdkgen.ToolSpec(name="fetch", output_schema=output)])
    assert "def fetch(**extra: JSON) -> JSON:" in sdk.stub
    assert "FetchOutput" not in sdk.stub and ": TypeAlias = Any" not in sdk.stub


def test_draft_forms_are_read_as_their_2020_12_equivalents() -> None:
    stub = sdkgen.generate(CASES["dialects"]).stub
    assert "def legacy_range(*, low: float) -> JSON:" in stub
    assert "low: exclusiveMinimum: 0" in stub and "minimum: 0" not in stub.replace("Min", "")
    assert "def pair(*, point: list[float | str]) -> PairOutput:" in stub
    assert 'point: items in order: "number", "string"' in stub
    assert "PairOutput: TypeAlias = list[float | str | bool]" in stub


def test_open_objects_accept_other_keys_and_closed_ones_do_not() -> None:
    stub = sdkgen.generate(CASES["open_objects"] + CASES["nested"]).stub
    # open: the top level gets **extra; nested input objects also take any JSON object
    assert "record: AnnotateInputRecord | dict[str, JSON]" in stub
    assert "meta: NotRequired[AnnotateInputRecordMeta | dict[str, JSON]]" in stub
    assert "extra: int = ..., **extra_: JSON) -> AnnotateOutput:" in stub
    assert "record: NotRequired[AnnotateOutputRecord]" in stub  # outputs stay strict
    assert "def patterned(*, name: str = ..., **extra: JSON)" in stub
    # closed (additionalProperties: false): strict signature and TypedDict, no PEP 728 keywords
    assert "passengers: list[SearchFlightsInputPassenger]," in stub
    assert "max_price: float = ...) -> SearchFlightsOutput:" in stub
    assert "closed=" not in stub and "extra_items=" not in stub


def test_a_non_local_ref_is_never_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secret.json").write_text('{"type": "object", "properties": {"pin": {}}}')
    monkeypatch.chdir(tmp_path)
    opened: list[str] = []

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and "secret.json" in str(args[0]):
            opened.append(str(args[0]))

    sys.addaudithook(audit)  # hooks cannot be removed; this one only records one name
    refs = ["secret.json", (tmp_path / "secret.json").as_uri(), "http://127.0.0.1:9/s.json"]
    for ref in refs:
        schema = {"type": "object", "properties": {"a": {"$ref": ref, "description": "A."}}}
        sdk = sdkgen.SdkGenerator().generate([sdkgen.ToolSpec(name="t", input_schema=schema)])
        assert "not followed (only local references)" in sdk.stub
        assert "def t(*, a: Any = ..., **extra: JSON) -> JSON:" in sdk.stub  # any value
    assert opened == []


def test_a_schema_nested_past_any_sane_depth_is_typed_as_json_or_refused_clearly() -> None:
    # Python's default limit (an in-process mypy run raises it for the whole process)
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        _deep_schemas()
    finally:
        sys.setrecursionlimit(before)


def _deep_schemas() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(300):
        deep = {"type": "object", "properties": {"a": deep}}
    sdk = sdkgen.SdkGenerator().generate(
        [sdkgen.ToolSpec(name="t", input_schema={"type": "object", "properties": {"x": deep}})]
    )
    assert "nested deeper than 200 levels; typed as JSON" in sdk.stub
    for _ in range(3000):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(ValueError, match="tool 't': schema nested too deeply"):
        sdkgen.generate([sdkgen.ToolSpec(name="t", input_schema=deep)])


def test_optional_params_show_ellipsis_and_docstrings_carry_constraints() -> None:
    stub = sdkgen.generate(CASES["nested"] + CASES["enums"]).stub
    assert "max_price: float = ..." in stub
    assert "passengers: minItems: 1" in stub
    assert "max_price: exclusiveMinimum: 0" in stub
    assert '"closed"=done' in stub and "2=high" in stub


def test_type_names_never_clash_with_tool_idents_or_other_tools() -> None:
    out = {"type": "object", "properties": {"n": {"type": "integer"}}}
    specs = [
        sdkgen.ToolSpec(name="search", output_schema=out),
        sdkgen.ToolSpec(name="SearchOutput", output_schema=out),
        sdkgen.ToolSpec(name="Search", output_schema=out),
    ]
    sdk = sdkgen.generate(specs)
    tree = ast.parse(sdk.stub)
    defined = [n.name for n in tree.body if isinstance(n, ast.ClassDef)] + [
        t.id
        for n in tree.body
        if isinstance(n, ast.AnnAssign | ast.Assign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    ]
    assert len(defined) == len(set(defined))
    assert not set(defined) & {t.ident for t in sdk.tools}


def test_warm_cache_assembles_without_the_type_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = sdkgen.SdkGenerator()
    specs = all_specs()
    gen.prepare(specs)
    expected = sdkgen.SdkGenerator().generate(specs)
    monkeypatch.setattr(_generator, "build_fragment", _no_generation)
    assert gen.generate(specs) == expected


def test_disk_cache_survives_a_new_generator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = CASES["nested"] + CASES["refs"]
    expected = sdkgen.SdkGenerator(cache_dir=tmp_path).generate(specs)
    assert list(tmp_path.glob("*.json"))
    monkeypatch.setattr(_generator, "build_fragment", _no_generation)
    assert sdkgen.SdkGenerator(cache_dir=tmp_path).generate(specs) == expected


def test_a_corrupt_disk_cache_entry_is_regenerated(tmp_path: Path) -> None:
    specs = CASES["enums"]
    expected = sdkgen.SdkGenerator(cache_dir=tmp_path).generate(specs)
    for path in tmp_path.glob("*.json"):
        path.write_text("{not json")
    assert sdkgen.SdkGenerator(cache_dir=tmp_path).generate(specs) == expected


def test_prepare_from_threads_while_generating_is_consistent() -> None:
    gen = sdkgen.SdkGenerator()
    specs = all_specs()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            gen.prepare(specs)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    during = gen.generate(specs)
    for t in threads:
        t.join()
    assert not errors
    assert during == gen.generate(specs) == sdkgen.SdkGenerator().generate(specs)


def _schema_bytes(data: list[dict[str, Any]]) -> int:
    keys = ("name", "description", "input_schema", "output_schema")
    return len(json.dumps([{k: t.get(k) for k in keys} for t in data]).encode())


def test_stub_of_50_realistic_tools_is_smaller_than_their_json_schemas() -> None:
    data = json.loads(FIXTURE.read_text())
    assert len(data) == 50
    assert sum(t["output_schema"] is not None for t in data) >= 40
    sdk = sdkgen.generate(load_specs(data))
    assert len(sdk.stub.encode()) <= _schema_bytes(data)
    assert len(sdk.tools) == 50


def test_cli_accepts_both_json_shapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = [{"name": "ping", "description": "Ping.", "input_schema": {"type": "object"}}]
    mcp = {"tools": [{"name": "ping", "description": "Ping.", "inputSchema": {"type": "object"}}]}
    outputs = []
    for i, data in enumerate([plain, mcp]):
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps(data))
        assert main([str(path)]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == sdkgen.generate(load_specs(plain)).stub
    assert main([str(tmp_path / "0.json"), "--module"]) == 0
    assert capsys.readouterr().out == sdkgen.generate(load_specs(plain)).module


def test_cli_reports_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"tools": 3}')
    assert main([str(path)]) == 2
    assert "expected" in capsys.readouterr().err


def test_frozen_specs_are_read_once_and_other_specs_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[str] = []
    original = _ir.tool_ir

    def counting(spec: sdkgen.ToolSpec, ident: str, fragment: Any) -> Any:
        made.append(spec.name)
        return original(spec, ident, fragment)

    monkeypatch.setattr(_generator, "tool_ir", counting)
    specs = all_specs()
    frozen = sdkgen.SdkGenerator(frozen_specs=True)
    first = frozen.generate(specs, described=(), prelude=False)
    assert sorted(made) == sorted(s.name for s in specs)
    made.clear()
    again = frozen.generate(list(reversed(specs)), described=(), prelude=False)
    assert made == [] and again == first
    # Without the promise, a schema changed in place is read again.
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    spec = sdkgen.ToolSpec(name="t", input_schema=schema)
    plain = sdkgen.SdkGenerator()
    assert [p.ident for p in plain.generate([spec]).tools[0].params] == ["a"]
    schema["properties"]["b"] = {"type": "string"}
    assert [p.ident for p in plain.generate([spec]).tools[0].params] == ["a", "b"]
