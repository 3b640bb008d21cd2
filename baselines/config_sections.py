"""The sections of the training configuration: one dataclass per section of the YAML file (``env``,
``model``, ``generation``, ``rollout``, ``optim``, ``log``, ``ray``, ``distributed``).

Their defaults are the embedded default run. :class:`baselines.config.TrainConfig` nests them
(with the schemes' own ``advantage`` and ``loss`` sections); import them from :mod:`baselines.config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: the sampling mode each scheme needs (``rollout.mode = "auto"`` picks this one)
SCHEME_ROLLOUT: dict[str, str] = {
    "grpo": "episodes",
    "dr_mas": "episodes",
    "sharp": "episodes",
    "at_grpo": "branching",
    "magrpo": "joint_tree",
    "mars2": "env_tree",
    "rloo": "episodes",
    "remax": "episodes",  # + one greedy episode per task, the baseline (rollout.sample greedy_baseline)
    "reinforce": "episodes",
    "iac": "episodes",
    "maac": "episodes",
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
class AgentModelConfig:
    """One agent's own model (``model.agents.<agent>``): its checkpoint and its device (None = the
    team's ``model.path`` / the run's ``device``). Needs ``model.sharing: separate``."""

    path: str | None = None
    device: str | None = None


@dataclass
class ModelConfig:
    """The policies: a model path / hub id, or a tiny model built locally (``path = None``).

    sharing: "shared" (one model, roles by prompt), "lora" (one LoRA adapter per agent on a
        shared base), "single_model" (ONE LoRA adapter on the base plays every agent: the
        single-model baseline), "separate" (one full model per agent).
    agents: per-agent model and device, e.g. ``{speaker: {path: ./a, device: cuda:0}}``
        (CLI ``--agent-model AGENT=MODEL``, ``--agent-device AGENT=DEVICE``); "separate" only.
    tiny_*: shape of the locally built model when ``path`` is None (no download).
    """

    path: str | None = None
    sharing: Literal["shared", "lora", "single_model", "separate"] = "shared"
    agents: dict[str, AgentModelConfig] = field(default_factory=dict)
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
    #: the word mask also allows EOS (the policy may end its answer); false for one-word answers
    #: (``generation.max_new_tokens: 1``), where EOS first is an empty answer, not a word
    mask_eos: bool = True
    lora_r: int = 8
    lora_alpha: int = 16
    dtype: str = "float32"
    #: recompute the decoder layers' activations in the backward pass (less memory, more compute)
    gradient_checkpointing: bool = False
    #: where the locally built tiny model is saved (default: <run dir>/tiny_model)
    tiny_dir: str | None = None

    def __post_init__(self) -> None:
        own = sorted(a for a, m in self.agents.items() if m.path is not None or m.device is not None)
        if own and self.sharing != "separate":
            raise ValueError(f"model.agents gives {own} their own model or device, which needs "
                             f"model.sharing=separate (one model per agent), not {self.sharing!r}")


@dataclass
class GenerationSettings:
    """Sampling settings handed to the generation backend."""

    def backend_options(self) -> dict:
        """The transformers backend's keyword arguments these settings name."""
        return {"max_batch_size": self.max_batch_size or None, "decode": self.decode,
                "team_decoder": self.team_decoder, "cuda_graphs": self.cuda_graphs}  # fmt: skip

    max_new_tokens: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    backend: Literal["transformers", "vllm", "vllm_server"] = "transformers"
    #: max sequences per generate() call (0 = all at once)
    max_batch_size: int = 0
    #: transformers backend: "fast" (lean decode loop: the whole team in one forward per token, CUDA
    #: graphs on CUDA; same sampling distribution and log-probs) or "generate" (``model.generate``)
    decode: Literal["fast", "generate"] = "fast"
    #: fast decode through the team decoder (Llama / Mistral / Qwen2 layouts; null: where the model allows
    #: it, false: the model's own forward with peft's per-row adapters)
    team_decoder: bool | None = None
    #: fast decode: capture the team decoder's step as a CUDA graph (null: on CUDA; never on a CPU)
    cuda_graphs: bool | None = None
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
        "joint_tree" (MAGRPO: aligned joint actions expand a tree), "cross_tree" (MAGRPO's cross
        mode: every combination of the agents' answers is a child), "env_tree" (MARS2: the
        environment's own search tree; a flat tree of G episodes if it has none).
    tasks_per_step: task instances (env seeds) per optimizer step.
    group_size: G (episodes / joint actions per node) or K (candidates per state).
    tree_depth: MAGRPO turns that branch; deeper turns continue with one joint action.
        The discount of the return-to-go is ``advantage.gamma`` (the only gamma knob).
    max_tree_nodes: cap on the nodes of one cross tree (it grows as (G^k)^depth, k agent-steps
        per turn): a clear error beyond it.
    credit_method / credit_mode: SHARP credit ("shapley" exact or "single_mask") and the
        env's counterfactual mode.
    tool_reward_key: reward component read as SHARP's R_tool,k (0 when the env has none).
    max_steps_per_episode: safety cap on agent-steps of one episode.
    """

    mode: Literal["auto", "episodes", "branching", "joint_tree", "cross_tree", "env_tree"] = "auto"
    tasks_per_step: int = 32
    group_size: int = 8
    tree_depth: int = 2
    max_tree_nodes: int = 4096
    credit_method: Literal["shapley", "single_mask"] = "shapley"
    credit_mode: str = "rescore"
    tool_reward_key: str = "tool_validity"
    max_steps_per_episode: int = 1000


@dataclass
class CriticConfig:
    """The value heads of the actor-critic schemes (``scheme: iac`` or ``maac``; unused otherwise).

    hidden: width of the head's hidden layer; lr: its Adam learning rate; epochs: full-batch Adam
    steps per optimizer step on the scheme's targets (GAE's lambda-returns).
    """

    hidden: int = 64
    lr: float = 3e-3
    epochs: int = 8

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.epochs < 1 or self.lr <= 0:
            raise ValueError(f"critic.hidden and critic.epochs must be >= 1 and critic.lr > 0, got {self}")


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
    #: rows per forward/backward pass within a minibatch (gradient accumulation: the same gradient,
    #: a lower peak memory; 0 = all of an agent's rows of the minibatch in one pass)
    micro_batch_rows: int = 0
    skip_nonfinite: bool = True
    #: entropy bonus: the trainer minimizes loss - entropy_coef * (token-mean entropy); 0 = off
    entropy_coef: float = 0.05
    #: recompute pi_old with a training-mode forward pass (else the sampler's log-probs)
    recompute_old_logprobs: bool = False


@dataclass
class EvalConfig:
    """Held-out evaluation during training (:mod:`baselines.heldout`).

    every_steps: evaluate at step 0, every N steps and at the last step (0 = only the final evaluation).
    episodes: held-out tasks of the fixed split (one sampled episode each); seed: draws them, and seeds
        the evaluation's sampling, so every evaluation plays the same tasks with the same noise.
    """

    every_steps: int = 0
    episodes: int = 64
    seed: int = 4_242

    def __post_init__(self) -> None:
        if self.every_steps < 0 or self.episodes < 1:
            raise ValueError(f"eval.every_steps must be >= 0 and eval.episodes >= 1, got {self}")


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
    #: also write each step's sample table to samples/step_<k>.jsonl (all ranks' rows; can be large) and its
    #: decoded text and advantages to samples/step_<k>.text.jsonl (for report.html, baselines.report)
    save_samples: bool = False
    #: measure each agent's KL to its starting policy every step (``agent/<name>/kl_ref``, k3 on the step's
    #: tokens) without adding it to the loss; the frozen reference is the adapter-free base in LoRA mode
    #: (no copy), a frozen copy of each model otherwise. ``loss.kl_coef > 0`` measures it anyway.
    kl_to_start: bool = False
    #: without save_samples, still keep a bounded sample for report.html: the first sample_episodes episodes
    #: of sample_steps steps spread over the run (the first and the last included); sample_steps=0: none
    sample_steps: int = 4
    sample_episodes: int = 8

    def __post_init__(self) -> None:
        if self.sample_steps < 0 or self.sample_episodes < 1:
            raise ValueError(f"log.sample_steps must be >= 0 and log.sample_episodes >= 1, got "
                             f"{self.sample_steps} and {self.sample_episodes}")


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
