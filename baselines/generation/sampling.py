"""One decode step's choice of tokens and their log-probs, without a host synchronisation.

:func:`pick` takes a step's float32 logits (rows x vocabulary) and returns the sampled tokens and
``log_softmax(logits / temperature)`` at them -- the numbers
:class:`~baselines.generation.transformers_backend.SampledLogprobs` records for ``generate`` (the
sampling policy's log-probs before any top-k / top-p renormalization).

Sampling draws from ``softmax(scores)`` (scores: ``logits / temperature``, then transformers' own
top-k and top-p warpers when set) with the **exponential race**: ``argmax(p / E)``, ``E`` i.i.d.
Exponential(1). Token ``i`` wins with probability ``p_i / sum(p)`` -- exactly the distribution
``torch.multinomial`` draws from (``E_i / p_i`` is Exponential(p_i), and the minimum of independent
exponentials is attained at ``i`` with probability ``p_i / sum(p)``), but as an elementwise draw
and an argmax, which neither checks its input on the host nor synchronises (``multinomial``
does, twice), so a whole decode step, sampling included, can be one CUDA graph. Greedy decoding is
the argmax of the logits. Tested for equal distribution against ``multinomial`` in
``tests/baselines/test_sampling.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import TopKLogitsWarper, TopPLogitsWarper

from baselines.generation.types import GenerationConfig


def exponential_race(probs: torch.Tensor) -> torch.Tensor:
    """One index per row of ``probs`` (rows x n, rows summing to 1 or not), drawn with probability proportional
    to its entry; rows of ``probs`` with zeros never draw those."""
    race = torch.empty_like(probs).exponential_()
    return (probs / race).argmax(-1)


def logprob_of(logits: torch.Tensor, tokens: torch.Tensor, config: GenerationConfig) -> torch.Tensor:
    """``log_softmax(logits / temperature)`` at ``tokens`` (one per row): the recorded log-prob."""
    return torch.log_softmax(logits / config.scoring_temperature, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def pick(logits: torch.Tensor, config: GenerationConfig, forced: torch.Tensor | None = None
         ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(tokens, their log-probs) for one step's float32 ``logits`` (rows x vocabulary); ``forced``: take these
    tokens instead of drawing (a teacher-forced pass through the sampler: its own log-probs of given tokens)."""
    if forced is not None:
        return forced, logprob_of(logits, forced, config)
    if config.greedy:
        tokens = logits.argmax(-1)
        return tokens, logprob_of(logits, tokens, config)
    logp = torch.log_softmax(logits / config.scoring_temperature, dim=-1)
    if config.top_k or config.top_p < 1.0:  # transformers' warpers on the scaled logits, then their softmax
        scores = logits / config.scoring_temperature
        if config.top_k:
            scores = TopKLogitsWarper(config.top_k)(None, scores)
        if config.top_p < 1.0:
            scores = TopPLogitsWarper(config.top_p)(None, scores)
        probs = F.softmax(scores, dim=-1)
    else:  # the untruncated distribution is the recorded one: one log-softmax serves both
        probs = logp.exp()
    tokens = exponential_race(probs)
    return tokens, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
