"""Shared pieces of the generation tests (``test_generation*.py``): the agents and prompts they ask
for, the log-prob recomputation check, and a tiny team taught to stop (or not) at EOS."""

from __future__ import annotations

import torch

from baselines.generation import GenOutput, GenRequest
from baselines.policies import Team, TeamConfig
from tests.baselines.conftest import chat

AGENTS = ["speaker", "listener"]
USERS = [
    "candidates: apple boat cat drum\ntarget: cat",
    "target: egg",
    "candidates: owl pen nut jar kite lamp moon\ntarget: owl",
    "candidates: fish goat\nmessage: goat",
]


def requests() -> list[GenRequest]:
    return [GenRequest(AGENTS[i % 2], chat(u, AGENTS[i % 2])) for i, u in enumerate(USERS)]


def assert_logprobs_recomputed(team: Team, outs: list[GenOutput], temperature: float) -> None:
    """The log-probs a backend reported are those :meth:`Team.sequence_logprobs` recomputes."""
    for out in outs:
        logps, _ = team.sequence_logprobs(
            out.agent, [out.prompt_ids], [out.completion_ids], temperature=temperature
        )
        assert len(out.logprobs) == len(out.completion_ids) > 0
        torch.testing.assert_close(logps[0].detach(), torch.tensor(out.logprobs), atol=1e-4, rtol=0)


def team_taught_to_stop(model: str) -> tuple[Team, list[list[int]], list[int]]:
    """A shared team on checkpoint ``model`` whose speaker was trained (25 Adam steps) to answer the
    prompt of ``USERS[0]`` with " cat</s>" and that of ``USERS[1]`` with " egg" x 5, no EOS.

    Returns (team, the two prompts' token ids, the ids of " cat</s>")."""
    team = Team.from_config(TeamConfig(mode="shared", model=model), AGENTS)
    tok = team.tokenizer("speaker")
    prompts = [team.encode_prompt("speaker", chat(u)) for u in USERS[:2]]
    cat = tok(" cat", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    targets = [cat, tok(" egg" * 5, add_special_tokens=False)["input_ids"]]
    opt = torch.optim.Adam(team.trainable_parameters("speaker").values(), lr=3e-2)
    for _ in range(25):
        opt.zero_grad()
        logps, _ = team.sequence_logprobs("speaker", prompts, targets)
        (-sum(lp.sum() for lp in logps)).backward()
        opt.step()
    return team, prompts, cat


def perturb_adapter(team: Team, agent: str, std: float) -> None:
    """Draw ``agent``'s LoRA B matrices from N(0, std) (fresh adapters are the identity), so that
    its policy differs from the other agents'."""
    with torch.no_grad():
        for n, p in team.trainable_parameters(agent).items():
            if "lora_B" in n:
                p.normal_(0, std)


def count_generate_calls(model: torch.nn.Module, dim: int) -> list[int]:
    """Wrap ``model.generate``: the returned list gets ``input_ids.shape[dim]`` of every call
    (0: rows per call, 1: padded prompt length)."""
    calls: list[int] = []
    real_generate = model.generate

    def counting_generate(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[dim])
        return real_generate(*args, **kwargs)

    model.generate = counting_generate
    return calls
