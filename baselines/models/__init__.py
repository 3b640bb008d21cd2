"""Named pretrained model presets (``--model smollm2-135m-instruct``), converted once into a local cache."""

from baselines.models.cache import default_cache_dir
from baselines.models.presets import (
    PRESETS,
    ModelPreset,
    PreparedModel,
    PresetNotInstalledError,
    UnknownModelError,
    prepare_preset,
    resolve_model,
)

__all__ = [
    "PRESETS",
    "ModelPreset",
    "PreparedModel",
    "PresetNotInstalledError",
    "UnknownModelError",
    "default_cache_dir",
    "prepare_preset",
    "resolve_model",
]
