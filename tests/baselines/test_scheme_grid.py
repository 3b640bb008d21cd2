"""The scheme grid experiment (docs/reproducing.md section 6): every documented cell is a valid config."""

from __future__ import annotations

import pytest

from baselines.experiments import scheme_grid
from baselines.experiments.common import quiet_config


def test_every_cell_of_the_grid_is_a_valid_config_and_the_inapplicable_one_is_refused():
    for task in scheme_grid.TASKS:
        for variant in scheme_grid.VARIANTS:
            config = quiet_config(scheme_grid.overrides(task, variant, 0))
            expected = "single_model" if variant == "single_model" else "lora"
            assert config.model.sharing == expected and config.eval.every_steps == 5
            assert config.scheme == ("grpo" if variant == "single_model" else variant)
    with pytest.raises(SystemExit, match="no counterfactual credit"):
        scheme_grid.main(["--task", "plan_path", "--variant", "sharp"])
