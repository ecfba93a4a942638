"""Every example of python/examples runs and checks its own results (the README quotes them)."""

import pathlib
import runpy

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path):
    if path.name.startswith("torch_"):
        pytest.importorskip("torch")
    runpy.run_path(str(path), run_name="__main__")
