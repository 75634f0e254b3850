"""SDK generation in a helper process: the same SDK, byte for byte; the host never runs
datamodel-code-generator itself; a helper that fails is replaced by in-process generation;
closing stops it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import sdkgen
from sdkgen._fragment_service import FragmentProcess, GeneratorClosed
from sdkgen._ir import needs_fragment

from .cases import all_specs as specs_of_every_case


def test_the_helper_makes_the_same_sdk_byte_for_byte(tmp_path: Path) -> None:
    specs = specs_of_every_case()
    here = sdkgen.SdkGenerator().generate(specs, header="h")
    remote = sdkgen.SdkGenerator(tmp_path, out_of_process=True)
    try:
        there = remote.generate(specs, header="h")
        assert remote_helper_running(remote)
    finally:
        remote.close()
    assert there == here
    assert any(tmp_path.iterdir()), "the helper wrote the fragments to the disk cache"


def remote_helper_running(generator: sdkgen.SdkGenerator) -> bool:
    helper = generator._helper  # noqa: SLF001 - the test inspects its own fixture
    return helper is not None and helper.running


def test_a_warm_small_sdk_is_assembled_without_starting_the_helper(tmp_path: Path) -> None:
    specs = specs_of_every_case()[:3]
    sdkgen.SdkGenerator(tmp_path).generate(specs)  # warms the disk cache
    generator = sdkgen.SdkGenerator(tmp_path, out_of_process=True)
    try:
        generator.generate(specs)
        assert not remote_helper_running(generator)
    finally:
        generator.close()


def test_the_host_process_never_imports_the_type_generator(tmp_path: Path) -> None:
    code = (
        "import sys, pathlib, sdkgen\n"
        "g = sdkgen.SdkGenerator(pathlib.Path(sys.argv[1]), out_of_process=True)\n"
        "spec = sdkgen.ToolSpec(name='t', input_schema={'type': 'object', 'properties':"
        " {'a': {'type': 'integer'}}}, output_schema={'type': 'string'})\n"
        "sdk = g.generate([spec])\n"
        "g.close()\n"
        "print('def t(' in sdk.stub, 'datamodel_code_generator' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "False"]


def test_a_failing_helper_falls_back_to_in_process_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    generator = sdkgen.SdkGenerator(None, out_of_process=True)
    spec = sdkgen.ToolSpec(name="t", input_schema={"type": "object"})
    assert "def t(" in generator.generate([spec]).stub
    generator.close()


class Liar(FragmentProcess):
    """A helper that answers every request with the line it was made with."""

    def __init__(self, reply: str) -> None:
        super().__init__()
        self._reply = reply

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            self._process = subprocess.Popen(
                [sys.executable, "-c", f"import sys; sys.stdin.readline(); print({self._reply!r})"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        return self._process


@pytest.mark.parametrize(
    "reply", ['{"ok": 1}', '{"ok": true}', '{"ok": true, "fragments": [1, 2]}', "[]", "nope"]
)
def test_a_malformed_reply_is_refused(reply: str) -> None:
    helper = Liar(reply)
    assert helper.fragments([(sdkgen.ToolSpec(name="t"), "T")]) is None
    helper.close()


def test_a_fragment_that_is_not_what_generation_makes_is_refused() -> None:
    smuggled = {
        "definitions": ["import os\n"], "type_names": ["T"], "typing_names": [], "params": [],
        "returns": "JSON", "notes": [],
    }  # fmt: skip
    helper = Liar(json.dumps({"ok": True, "fragments": [smuggled]}))
    assert helper.fragments([(sdkgen.ToolSpec(name="t"), "T")]) == [None]
    helper.close()


def test_a_tool_whose_stub_is_not_shown_needs_no_fragment(tmp_path: Path) -> None:
    plain = [spec for spec in specs_of_every_case() if not needs_fragment(spec)]
    assert len(plain) > 10
    generator = sdkgen.SdkGenerator(tmp_path, out_of_process=True)
    try:
        sdk = generator.generate(plain, described=(), prelude=False)
        assert not remote_helper_running(generator)
        assert not any(tmp_path.iterdir())
        assert sdk.stub == "class tools:\n    ...\n"
        assert [t.name for t in sdk.tools] == sorted(s.name for s in plain)
    finally:
        generator.close()


def running(helper: FragmentProcess) -> bool:
    return helper.running


def test_close_stops_the_helper_and_is_final(tmp_path: Path) -> None:
    generator = sdkgen.SdkGenerator(tmp_path, out_of_process=True)
    generator.generate(specs_of_every_case())
    helper = generator._helper  # noqa: SLF001
    assert helper is not None and helper.running
    generator.close()
    assert not running(helper)
    assert "def " in generator.generate(specs_of_every_case()[:1]).stub  # in-process now


def test_a_generator_dropped_without_close_leaves_no_process(tmp_path: Path) -> None:
    import gc

    generator = sdkgen.SdkGenerator(tmp_path, out_of_process=True)
    generator.generate(specs_of_every_case())
    helper = generator._helper  # noqa: SLF001
    assert helper is not None
    process = helper._process  # noqa: SLF001
    assert process is not None and process.poll() is None
    del generator, helper
    gc.collect()
    assert process.returncode is not None  # reaped by the finalizer, pipes closed


def test_close_does_not_wait_for_a_generation_in_progress(tmp_path: Path) -> None:
    # Enough cold tools to keep the helper busy for seconds (about 8 ms each).
    union = {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {}}}]}
    specs = [  # not simple: each needs the type generator (about 8 ms in the helper)
        sdkgen.ToolSpec(
            name=f"tool_{i}", input_schema={"type": "object", "properties": {f"f{i}": union}}
        )
        for i in range(2000)
    ]
    generator = sdkgen.SdkGenerator(tmp_path, out_of_process=True)
    helper = generator._helper  # noqa: SLF001
    assert helper is not None
    outcome: list[object] = []

    def generate() -> None:
        try:
            outcome.append(generator.generate(specs))
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcome.append(exc)

    worker = threading.Thread(target=generate)
    worker.start()
    deadline = time.monotonic() + 60
    # Inside the request: the helper is up and the request holds the helper's lock.
    while not (helper.running and helper._lock.locked()):  # noqa: SLF001
        assert time.monotonic() < deadline and worker.is_alive(), outcome
        time.sleep(0.01)
    generator.close()  # kills the helper under the request instead of waiting it out
    worker.join(60)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], GeneratorClosed), outcome
    assert not running(helper)
