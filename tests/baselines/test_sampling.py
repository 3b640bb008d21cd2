"""The exponential race (:func:`baselines.generation.sampling.exponential_race`) draws what
``torch.multinomial`` draws: a chi-square goodness-of-fit test of both against the distribution, and
of the two against each other; a biased race fails the same test (the test has power)."""

from __future__ import annotations

import torch

from baselines.generation.sampling import exponential_race, pick
from baselines.generation.types import GenerationConfig

#: chi-square critical values at p = 0.001 for 7 and 8 degrees of freedom (tables)
CHI2_999 = {7: 24.32, 8: 26.12}
PROBS = torch.tensor([0.30, 0.20, 0.15, 0.12, 0.10, 0.06, 0.04, 0.02, 0.01, 0.0])
DRAWS = 200_000


def _counts(draw, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    tokens = draw(PROBS.expand(DRAWS, -1).contiguous())
    return torch.bincount(tokens, minlength=PROBS.numel()).double()


def _chi2_fit(counts: torch.Tensor) -> float:
    expected = PROBS[:-1].double() * DRAWS
    return float(((counts[:-1] - expected) ** 2 / expected).sum())


def _chi2_two_samples(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a[:-1], b[:-1]
    return float(((a - b) ** 2 / (a + b)).sum())


def test_the_race_draws_the_multinomial_distribution():
    race = _counts(exponential_race, seed=0)
    multinomial = _counts(lambda p: torch.multinomial(p, 1).squeeze(1), seed=1)
    assert race[-1] == 0 and multinomial[-1] == 0  # a zero-probability token is never drawn
    assert _chi2_fit(race) < CHI2_999[8]
    assert _chi2_fit(multinomial) < CHI2_999[8]
    assert _chi2_two_samples(race, multinomial) < CHI2_999[8]


def test_a_biased_race_fails_the_same_test():
    """argmax(log p + noise) with exponential noise instead of Gumbel noise favours likely tokens."""
    biased = _counts(lambda p: (p.log() + torch.empty_like(p).exponential_()).argmax(-1), seed=0)
    assert _chi2_fit(biased) > 10 * CHI2_999[8]


def test_pick_keeps_to_top_k_and_reports_the_unwarped_logprob():
    torch.manual_seed(0)
    logits = torch.randn(64, 50)
    tokens, logp = pick(logits, GenerationConfig(temperature=0.7, top_k=3))
    top = logits.topk(3, dim=-1).indices
    assert bool((tokens[:, None] == top).any(-1).all())
    expected = torch.log_softmax(logits / 0.7, -1).gather(-1, tokens[:, None]).squeeze(1)
    torch.testing.assert_close(logp, expected)
    greedy, _ = pick(logits, GenerationConfig(temperature=0))
    assert torch.equal(greedy, logits.argmax(-1))
