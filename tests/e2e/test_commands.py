"""The ``ptc`` command is for users: no demo or benchmark there, nor any import of them (the
benchmark commands: ``benchmarks/tests/test_cli.py``, ``test_benchmark_commands.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptc.__main__ import main as ptc_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [["demo"], ["bench", "all"]])
def test_the_ptc_command_has_no_demo_or_bench(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        ptc_cli(argv)
    assert info.value.code == 2


def test_the_ptc_command_does_not_import_benchmarks() -> None:
    code = "import sys, ptc.__main__; print('benchmarks' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "False"
