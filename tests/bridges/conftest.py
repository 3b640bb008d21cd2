"""Bridge tests skip when their framework's extra is missing, except under CI=true where that fails."""

from __future__ import annotations

import os

import pytest

from llm_marl_envs.bridges import BridgeError, require


def need(framework: str):
    """The framework module, or skip (fail under CI=true) with the install command as the reason."""
    try:
        return require(framework)
    except BridgeError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the {framework} extra is missing: {exc}")
        pytest.skip(str(exc))
