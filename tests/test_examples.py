"""Every script under examples/ runs to the end on the embedded defaults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.embedded
@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script, tmp_path):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "GRAPHRAG_LLM": "embedded",
    }
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (
        f"{script.name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
    assert done.stdout.strip(), f"{script.name} printed nothing"
