"""Runs every python block of docs/bridges.md (each bridge's example), skipping a block whose extra is missing."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from tests.bridges.conftest import need

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "bridges.md"
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)


def test_the_guide_has_an_example_per_bridge():
    assert len(BLOCKS) == 4
    assert ["trl" in b and "rollout_func" in b for b in BLOCKS][0]
    assert "environment_factory" in BLOCKS[1] and "make_env" in BLOCKS[2] and "SeatServer" in BLOCKS[3]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index, capsys):
    code = BLOCKS[index]
    if "trl" in code:
        need("trl")
    if "verifiers_env" in code:
        need("verifiers")
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, f"bridges.md (block {index})", "exec"), namespace)
    printed = capsys.readouterr().out
    if "SeatServer" in code:
        assert printed.split() == ["3.0", "3"]
    if "make_env" in code:
        assert printed.strip() == "['listener', 'speaker'] ['0', '1', '2']"
    if "rollout_func" in code:
        assert len(namespace["trainer"].state.log_history) > 4
    if "environment_factory" in code:
        assert namespace["trainer"].state.global_step == 2
