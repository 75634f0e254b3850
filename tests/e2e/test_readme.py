"""The README's example runs as written (real workers) and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.needs_root
def test_readme_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1
    done = subprocess.run(
        [sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "x-2" in lines[0]
    assert "DENIED" in lines[1] and "UNKNOWN_TOOL" in lines[2]
    assert lines[3].startswith("FrozenList([FrozenDict({'type': 'text', 'text': '3'})])")
    assert "'level': 'full'" in lines[3]
