"""The Python examples of python/README.md and of the top-level README.md run (in a temporary
directory instead of /tmp/pets). A block ends with a training batch (`batch`) or an ingest's
report (`report`)."""

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).parents[2]


def python_blocks(readme):
    return re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)


@pytest.mark.parametrize("readme", ["python/README.md", "README.md"])
def test_readme_examples(tmp_path, readme):
    blocks = python_blocks(ROOT / readme)
    assert blocks, f"{readme} has no python block"
    for i, code in enumerate(blocks):
        scope = {}
        exec(code.replace("/tmp/pets", str(tmp_path / f"pets{i}")), scope)
        if "report" in scope:  # an ingest example
            assert scope["report"]["rows"] > 0
            continue
        batch = scope["batch"]
        assert tuple(batch["image"].shape) == (32, 64, 64, 3)
        assert len(batch["label"]) == 32
