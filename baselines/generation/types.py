"""Data types shared by the generation backends: sampling settings, requests, outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal


@dataclass
class GenerationConfig:
    """Sampling settings.

    Args:
        max_new_tokens: completion length cap (``finish_reason="length"`` when reached).
        temperature: softmax temperature; 0 means greedy decoding.
        top_p: nucleus sampling mass (1.0 = off).
        top_k: keep the k most likely tokens (0 = off).
        seed: when set, call ``i`` of a backend samples with seed ``seed + i`` (reproducible runs;
            the process-wide torch RNG is left untouched).
        max_prompt_tokens: prompts longer than this raise ``ValueError`` (None = no check).

    Log-probs reported in :class:`GenOutput` are ``log_softmax(logits / temperature)`` of the
    sampled token (``temperature=1`` for greedy), WITHOUT the top-p / top-k renormalization:
    the number ``Team.sequence_logprobs(..., temperature=temperature)`` recomputes. With the
    defaults (top_p=1, top_k=0) that is exactly the distribution sampled from.
    """

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    max_prompt_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def scoring_temperature(self) -> float:
        """The temperature that reproduces the reported log-probs (1 for greedy decoding)."""
        return 1.0 if self.greedy else self.temperature


@dataclass
class GenRequest:
    """One completion to produce for ``agent``, from chat ``messages`` or ready ``prompt_ids``."""

    agent: str
    messages: Sequence[Mapping[str, str]] | None = None
    prompt_ids: Sequence[int] | None = None

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt_ids is None):
            raise ValueError("GenRequest needs exactly one of messages or prompt_ids")


@dataclass
class GenOutput:
    """A generated completion.

    ``completion_ids`` include the EOS token when the model stopped (``finish_reason="stop"``)
    and nothing after it; ``text`` is their decoding without special tokens; ``logprobs`` has
    one entry per completion token (see :class:`GenerationConfig` for what they measure).
    """

    agent: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: Literal["stop", "length"]
    policy: str = field(default="")
