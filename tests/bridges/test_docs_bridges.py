"""Runs every python block of docs/bridges.md (each bridge's example), skipping a block whose extra is missing.

The TRL ``rollout_func`` block is the published script itself (``baselines/experiments/trl_signal_game.py``,
run by ``test_trl.py``); the verifiers episode block runs against a scripted OpenAI-compatible endpoint.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from tests.bridges.conftest import need

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "bridges.md"
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
SCRIPT = ROOT / "baselines" / "experiments" / "trl_signal_game.py"


def test_the_guide_has_an_example_per_bridge():
    assert len(BLOCKS) == 6
    assert BLOCKS[0] == SCRIPT.read_text()  # the documented rollout_func example is the published script, verbatim
    assert "environment_factory" in BLOCKS[1] and "make_env" in BLOCKS[2] and "run_episode" in BLOCKS[3]
    assert "SeatServer" in BLOCKS[4] and "GenericEnvClient" in BLOCKS[5]


# block 0 is the published TRL script (test_trl.py runs it); the OpenEnv client block runs in OpenEnv's own
# environment (test_openenv_stock_client.py runs it)
@pytest.mark.parametrize("index", [i for i, b in enumerate(BLOCKS) if i and "GenericEnvClient" not in b])
def test_example_runs(index, capsys):
    code = BLOCKS[index]
    if "trl" in code:
        need("trl")
    if "verifiers" in code:
        need("verifiers")
    code = code.replace("port=8000", "port=0")  # any free port here
    namespace: dict = {}
    model = None
    if "run_episode" in code:  # the endpoint the example names is this scripted one
        from tests.bridges.scripted_openai import ScriptedOpenAI

        model = ScriptedOpenAI("toy/signal_game_v0", {}, seed=0).__enter__()
        code = code.replace("http://127.0.0.1:8000/v1", model.url)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(code, f"bridges.md (block {index})", "exec"), namespace)
    finally:
        if model is not None:
            model.__exit__()
    printed = capsys.readouterr().out
    if "make_env" in code and "run_episode" not in code:
        assert printed.strip() == "['listener', 'speaker'] ['0', '1', '2']"
    if "run_episode" in code:
        assert printed.strip() == "True [('listener', 1.0), ('speaker', 1.0)]"
        assert model.turns == ["speaker", "listener"] and model.errors == []
    if "SeatServer" in code:
        namespace["server"].close()
        assert printed.startswith("http://127.0.0.1:")
    if "environment_factory" in code:
        assert namespace["trainer"].state.global_step == 2
        assert len(printed.strip().splitlines()[-1].split(",")) == 2  # the get_reward column of each step
