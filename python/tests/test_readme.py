"""python/README.md's example runs (in a temporary directory instead of /tmp/pets)."""

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")


def test_readme_example(tmp_path):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    scope = {}
    exec(code.replace("/tmp/pets", str(tmp_path / "pets")), scope)
    batch = scope["batch"]
    assert tuple(batch["image"].shape) == (32, 64, 64, 3) and len(batch["caption"]) == 32
