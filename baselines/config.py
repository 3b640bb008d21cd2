"""Training configuration: nested dataclasses, a YAML file, and ``key=value`` overrides.

Precedence (lowest first): the dataclass defaults (the embedded default run), the YAML file
(``--config file.yaml``), the command-line flags (``--env``, ``--scheme``...), and finally
``key=value`` overrides with dotted keys::

    python -m baselines.train --config baselines/configs/signal_game.yaml optim.lr=2e-3 \
        rollout.group_size=8 env.kwargs.n_candidates=4 advantage.scale_by_std=false

Values are parsed as YAML scalars (``1e-3`` -> float, ``true`` -> bool, ``[a, b]`` -> list,
``null`` -> None). Unknown keys raise a ``ValueError`` that lists the known ones, so a typo
never silently does nothing. The advantage and loss sections are the schemes' own
:class:`~baselines.advantages.AdvantageConfig` and :class:`~baselines.loss.LossConfig`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from baselines.advantages import ADVANTAGE_SCHEMES, AdvantageConfig
from baselines.loss import LossConfig

#: the sampling mode each scheme needs (``rollout.mode = "auto"`` picks this one)
SCHEME_ROLLOUT: dict[str, str] = {
    "grpo": "episodes",
    "dr_mas": "episodes",
    "sharp": "episodes",
    "at_grpo": "branching",
    "magrpo": "joint_tree",
    "mars2": "env_tree",
}

#: signal-game settings of the embedded default: 4 fixed words, 1-word messages, chance 0.25
DEFAULT_WORDS = ("apple", "boat", "cat", "drum")


@dataclass
class EnvConfig:
    """Which registered environment to train on and its keyword arguments."""

    name: str = "toy/signal_game_v0"
    kwargs: dict[str, Any] = field(
        default_factory=lambda: {"n_candidates": 4, "message_length": 1, "words": list(DEFAULT_WORDS)}
    )


@dataclass
class ModelConfig:
    """The policies: a model path / hub id, or a tiny model built locally (``path = None``).

    sharing: "shared" (one model, roles by prompt), "lora" (one LoRA adapter per agent on a
        shared base), "separate" (one full model per agent).
    tiny_*: shape of the locally built model when ``path`` is None (no download).
    """

    path: str | None = None
    sharing: Literal["shared", "lora", "separate"] = "shared"
    tokenizer: Literal["word", "bpe"] = "word"
    tiny_hidden_size: int = 64
    tiny_layers: int = 2
    tiny_heads: int = 4
    #: 0.3 makes the tiny model's first answers depend on the prompt (0.02, the usual LLM value,
    #: gives near-identical answers for every prompt, and RL then stalls at chance; docs/training.md)
    tiny_init_std: float = 0.3
    #: std of the tiny model's input embedding / untied output layer (None = tiny_init_std)
    tiny_embed_std: float | None = None
    tiny_head_std: float | None = None
    #: std of the tiny model's attention query/key projections (None = tiny_init_std)
    tiny_qk_std: float | None = None
    tiny_tie_embeddings: bool = True
    #: tiny Qwen2 model: attend only to the last N positions in every layer (None = full attention);
    #: 4 keeps the signal game's target / message word inside every layer's view at the answer
    tiny_sliding_window: int | None = 4
    #: restrict every agent's output tokens to these words (+ EOS): an action mask for text
    restrict_to_words: list[str] | None = None
    #: when restrict_to_words is None, mask each policy to the words the env declares with
    #: ``action_words(agent)`` (the signal game's vocabulary; free-text tasks declare none)
    mask_to_action_words: bool = True
    lora_r: int = 8
    lora_alpha: int = 16
    dtype: str = "float32"
    #: where the locally built tiny model is saved (default: <run dir>/tiny_model)
    tiny_dir: str | None = None


@dataclass
class GenerationSettings:
    """Sampling settings handed to the generation backend."""

    max_new_tokens: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    backend: Literal["transformers", "vllm", "vllm_server"] = "transformers"
    #: max sequences per generate() call (0 = all at once)
    max_batch_size: int = 0
    #: vLLM backend: GPU memory fraction for its engines
    vllm_gpu_memory_utilization: float = 0.4
    #: vllm_server backend: the running server's address, e.g. http://127.0.0.1:8000
    vllm_server_url: str | None = None
    #: vllm_server backend: where adapters are saved for the server to load (None = <run>/vllm_adapters)
    vllm_adapter_dir: str | None = None


@dataclass
class RolloutConfig:
    """How episodes are sampled (see ``baselines/rollout``).

    mode: "auto" (the scheme's own mode), "episodes" (G independent episodes per task),
        "branching" (AT-GRPO: K candidates per agent-turn from one cloned state),
        "joint_tree" (MAGRPO: aligned joint actions expand a tree), "env_tree" (MARS2: the
        environment's own search tree; a flat tree of G episodes if it has none).
    tasks_per_step: task instances (env seeds) per optimizer step.
    group_size: G (episodes / joint actions per node) or K (candidates per state).
    tree_depth: MAGRPO turns that branch; deeper turns continue with one joint action.
        The discount of the return-to-go is ``advantage.gamma`` (the only gamma knob).
    credit_method / credit_mode: SHARP credit ("shapley" exact or "single_mask") and the
        env's counterfactual mode.
    tool_reward_key: reward component read as SHARP's R_tool,k (0 when the env has none).
    max_steps_per_episode: safety cap on agent-steps of one episode.
    """

    mode: Literal["auto", "episodes", "branching", "joint_tree", "env_tree"] = "auto"
    tasks_per_step: int = 32
    group_size: int = 8
    tree_depth: int = 2
    credit_method: Literal["shapley", "single_mask"] = "shapley"
    credit_mode: str = "rescore"
    tool_reward_key: str = "tool_validity"
    max_steps_per_episode: int = 1000


@dataclass
class OptimConfig:
    """Optimizer and update loop: one AdamW per trained parameter set."""

    lr: float = 1e-3
    #: per-agent learning rates, e.g. {"speaker": 1e-3}; agents sharing parameters must agree
    agent_lr: dict[str, float] = field(default_factory=dict)
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    epochs: int = 1
    #: rows per minibatch (0 = the whole batch in one minibatch)
    minibatch_size: int = 0
    skip_nonfinite: bool = True
    #: entropy bonus: the trainer minimizes loss - entropy_coef * (token-mean entropy); 0 = off
    entropy_coef: float = 0.05
    #: recompute pi_old with a training-mode forward pass (else the sampler's log-probs)
    recompute_old_logprobs: bool = False


@dataclass
class LogConfig:
    """Outputs: JSONL metrics, TensorBoard, optional W&B, checkpoints, plot."""

    out_dir: str = "runs"
    run_name: str | None = None
    tensorboard: bool = True
    wandb: bool = False
    wandb_project: str = "llm-marl-envs"
    save_every: int = 0
    #: print a one-line summary (reward, per-agent gradient norms) every N steps (0 = never)
    log_every: int = 10
    progress: bool = True
    plot: bool = True
    #: also write each step's sample table to samples/step_<k>.jsonl (all ranks' rows; can be large)
    save_samples: bool = False


@dataclass
class RayConfig:
    """Sandbox pools as Ray actors (``.[ray]``; docs/scaling.md).

    sandbox_actors: > 0 runs the task's code in that many :class:`~baselines.ray_workers.SandboxActor`
        pools (passed to the task as ``sandbox=``; for tasks that take one), 0 = the local pool.
    sandbox_workers: pool size of each actor (None = the CPUs of its node).
    address: the cluster to join ("auto", "ray://host:10001"...); None = ``ray.init()``'s default
        (a running local cluster, else a new one).
    """

    sandbox_actors: int = 0
    sandbox_workers: int | None = None
    address: str | None = None


@dataclass
class DistributedConfig:
    """Data-parallel training across ``torchrun`` / ``accelerate launch`` ranks (docs/scaling.md).

    fsdp: shard every trained model (and its frozen reference / LoRA base) across the ranks with
        torch FSDP2 (``fully_shard``): each rank keeps 1/N of the weights, gradients and AdamW
        state (:mod:`baselines.sharding`). False = every rank holds a full replica (DDP-style).
        Ignored by a one-process run.
    """

    fsdp: bool = False


@dataclass
class TrainConfig:
    """Everything one training run needs. The defaults ARE the embedded default run."""

    scheme: str = "grpo"
    steps: int = 120
    seed: int = 0
    device: str = "cpu"
    #: stop early once the mean reward of the last 3 steps reaches this (None = never)
    target_reward: float | None = None
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    log: LogConfig = field(default_factory=LogConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)

    def __post_init__(self) -> None:
        if self.scheme not in ADVANTAGE_SCHEMES:
            raise ValueError(f"unknown scheme {self.scheme!r}; known: {sorted(ADVANTAGE_SCHEMES)}")
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")
        if self.rollout.group_size < 1 or self.rollout.tasks_per_step < 1:
            raise ValueError("rollout.group_size and rollout.tasks_per_step must be >= 1")
        if self.optim.epochs < 1:
            raise ValueError(f"optim.epochs must be >= 1, got {self.optim.epochs}")
        if self.loss.tis_cap is not None and not self.optim.recompute_old_logprobs:
            raise ValueError(
                f"loss.tis_cap={self.loss.tis_cap} corrects pi_old (training forward) against the sampler's "
                "log-probs, but optim.recompute_old_logprobs=false makes pi_old the sampler's log-probs, so the "
                "weight would always be 1: set optim.recompute_old_logprobs=true, or loss.tis_cap=null"
            )

    @property
    def rollout_mode(self) -> str:
        """The resolved sampling mode."""
        return SCHEME_ROLLOUT[self.scheme] if self.rollout.mode == "auto" else self.rollout.mode

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


# ---------------------------------------------------------------------------- conversion
def to_dict(obj: Any) -> Any:
    """A dataclass tree as plain dicts/lists (YAML/JSON friendly)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: type, data: dict[str, Any] | None, where: str = "") -> Any:
    """Build dataclass ``cls`` from a (possibly partial) dict; unknown keys raise."""
    data = dict(data or {})
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown config key(s) {[where + k for k in unknown]}; known: {sorted(known)}")
    kwargs = {}
    for name, value in data.items():
        tp = hints[name]
        if _is_dataclass_type(tp):
            kwargs[name] = value if dataclasses.is_dataclass(value) else from_dict(tp, value, f"{where}{name}.")
        else:
            kwargs[name] = _coerce(value, tp, where + name)
    return cls(**kwargs)


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Light type coercion for YAML values (int -> float, list -> tuple); mismatches raise."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ValueError as err:
                errors.append(str(err))
        raise ValueError(f"{where}: {value!r} does not fit {tp} ({'; '.join(errors)})")
    if origin is Literal:
        if value not in args:
            raise ValueError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if tp is Any:
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ValueError(f"{where}: expected a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, where) for v, a in zip(value, args))
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping, got {value!r}")
        return {k: _coerce(v, args[1], f"{where}.{k}") for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------- loading
def parse_override(item: str) -> tuple[list[str], Any]:
    """``"optim.lr=1e-3"`` -> (["optim", "lr"], 0.001)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"overrides look like key=value (e.g. optim.lr=1e-3), got {item!r}")
    value = yaml.safe_load(raw) if raw.strip() else ""
    if isinstance(value, str) and _looks_float(value):
        value = float(value)  # YAML 1.1 reads "1e-3" as a string
    return key.strip().split("."), value


def _looks_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def apply_override(data: dict[str, Any], path: list[str], value: Any) -> None:
    """Set ``data[path[0]][path[1]]... = value`` in a nested dict (creating levels)."""
    node = data
    for part in path[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[path[-1]] = value


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    base: dict[str, Any] | None = None,
) -> TrainConfig:
    """Defaults <- YAML file <- ``base`` (flag values) <- ``key=value`` overrides."""
    data = to_dict(TrainConfig())
    default_env = data["env"]["name"]
    layers = []
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: a config file must hold a mapping at the top level")
        layers.append(loaded)
    layers.append(base or {})
    parsed = [parse_override(item) for item in overrides]
    _reject_rollout_gamma(layers, parsed)
    kwargs_given = any(isinstance(layer.get("env"), dict) and "kwargs" in layer["env"] for layer in layers) or any(
        keys[:2] == ["env", "kwargs"] for keys, _ in parsed
    )
    for layer in layers:
        _merge(data, layer)
    env_name = next((v for k, v in reversed(parsed) if k == ["env", "name"]), data["env"]["name"])
    if env_name != default_env and not kwargs_given:
        data["env"]["kwargs"] = {}  # the default kwargs belong to the default environment
    for keys, value in parsed:
        apply_override(data, keys, value)
    return from_dict(TrainConfig, data)


def _reject_rollout_gamma(layers: list[dict[str, Any]], parsed: list[tuple[list[str], Any]]) -> None:
    """``rollout.gamma`` was a second MAGRPO discount that the scheme ignored: say where it went."""
    in_layers = any(isinstance(layer.get("rollout"), dict) and "gamma" in layer["rollout"] for layer in layers)
    if in_layers or any(keys == ["rollout", "gamma"] for keys, _ in parsed):
        raise ValueError("rollout.gamma was merged into advantage.gamma, the one discount of MAGRPO's "
                         "return-to-go (the sampler and the scheme both use it): set advantage.gamma")


def _merge(into: dict[str, Any], new: dict[str, Any]) -> None:
    """Recursive merge; a sub-dict replaces only the keys it names (env.kwargs included)."""
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict) and key != "kwargs":
            _merge(into[key], value)
        else:
            into[key] = value


def save_config(config: TrainConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
