"""Critics of the actor-critic schemes: IAC's value head per agent, MAAC's centralized critic.

Both read the policies' own features (:meth:`~baselines.policies.Team.prompt_features`: the last hidden
state at the row's last prompt token, from the agent's own model with its adapter, without gradients,
so the value loss never moves a policy's weights) and a small MLP head
``LayerNorm -> Linear(d, hidden) -> Tanh -> Linear(hidden, 1)``:

- :class:`PerAgentCritic` (IAC): one head per agent on that agent's feature, V_i(h_i,t);
- :class:`CentralCritic` (MAAC): one head on the joint observation of the row's moment: for every agent k,
  the feature of k's latest prompt in the episode at or before the row (by ``step``) and a 1, or zeros and
  a 0 where k has not acted yet; V(h_t) sees what every agent has seen so far.

Per optimizer step: :meth:`values` fills the table's ``value`` column (the scheme runs GAE on it), then
:meth:`update` regresses the head(s) on the scheme's targets (A + V, the lambda-returns): ``critic.epochs``
full-batch Adam steps of the mean squared error, on the features :meth:`values` computed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from baselines.policies import Team
from baselines.samples import SampleTable


def value_head(dim: int, hidden: int) -> nn.Module:
    """``LayerNorm -> Linear(dim, hidden) -> Tanh -> Linear(hidden, 1)``, the last layer starting at 0."""
    head = nn.Sequential(nn.LayerNorm(dim, elementwise_affine=False), nn.Linear(dim, hidden), nn.Tanh(),
                         nn.Linear(hidden, 1))
    nn.init.zeros_(head[-1].weight)
    nn.init.zeros_(head[-1].bias)
    return head


class Critic:
    """What both critics share: the features of a table's rows, the heads' training, their state."""

    def __init__(self, team: Team, agents: list[str], heads: dict[str, nn.Module], lr: float, epochs: int) -> None:
        self.team, self.agents, self.heads, self.epochs = team, agents, nn.ModuleDict(heads), epochs
        self.optimizer = torch.optim.Adam(self.heads.parameters(), lr=lr)
        self._inputs: dict[str, tuple[np.ndarray, Tensor]] = {}  # head -> (rows, inputs), from values()

    def features(self, table: SampleTable) -> dict[str, Tensor]:
        """``{agent: (rows of agent, feature dim)}`` for every agent of the table (each distinct prompt once)."""
        out = {}
        for agent in self.agents:
            rows = np.flatnonzero(table.agent == agent)
            prompts = [tuple(table.prompt_ids[i]) for i in rows]
            unique = list(dict.fromkeys(prompts))
            feats = self.team.prompt_features(agent, unique)
            index = {p: j for j, p in enumerate(unique)}
            out[agent] = feats[torch.as_tensor([index[p] for p in prompts], dtype=torch.long, device=feats.device)]
        return out

    def inputs(self, table: SampleTable) -> dict[str, tuple[np.ndarray, Tensor]]:
        """``{head: (table rows, head inputs)}``."""
        raise NotImplementedError

    def values(self, table: SampleTable) -> np.ndarray:
        """V of every row of ``table`` (float64); keeps the inputs for :meth:`update`."""
        self._inputs = self.inputs(table)
        out = np.full(len(table), np.nan)
        with torch.no_grad():
            for name, (rows, x) in self._inputs.items():
                out[rows] = self.heads[name](x).squeeze(-1).double().cpu().numpy()
        return out

    def update(self, targets: np.ndarray) -> dict[str, float]:
        """``epochs`` full-batch Adam steps of MSE to ``targets`` on the rows of the last :meth:`values`;
        returns the loss before and after, and R^2 = 1 - loss before / var(targets)."""
        if not self._inputs:
            raise RuntimeError("Critic.update() needs values() of the same table first")
        parts = {name: (x, torch.as_tensor(targets[rows], dtype=torch.float32, device=x.device))
                 for name, (rows, x) in self._inputs.items() if len(rows)}
        losses = []
        for k in range(self.epochs + 1):  # the last pass only measures the loss after the steps
            self.optimizer.zero_grad()
            loss = sum(((self.heads[n](x).squeeze(-1) - y) ** 2).sum().cpu() for n, (x, y) in parts.items())
            loss = loss / max(len(targets), 1)
            losses.append(float(loss.detach()))
            if k < self.epochs:
                loss.backward()
                self.optimizer.step()
        self._inputs = {}
        var = float(np.var(targets)) if len(targets) else 0.0
        explained = 1.0 - losses[0] / var if var > 0 else float("nan")
        return {"critic/loss": losses[0], "critic/loss_after": losses[-1], "critic/r2": explained,
                "critic/target_mean": float(np.mean(targets)) if len(targets) else float("nan")}

    def state_dict(self) -> dict[str, Any]:
        return {"heads": self.heads.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.heads.load_state_dict(state["heads"])
        self.optimizer.load_state_dict(state["optimizer"])


class PerAgentCritic(Critic):
    """IAC: agent i's head on agent i's own feature."""

    def __init__(self, team: Team, agents: list[str], *, hidden: int = 64, lr: float = 1e-3, epochs: int = 8) -> None:
        dims = {a: _feature_dim(team, a) for a in agents}
        heads = {a: value_head(dims[a], hidden).to(team.device(a)) for a in agents}
        super().__init__(team, agents, heads, lr, epochs)

    def inputs(self, table: SampleTable) -> dict[str, tuple[np.ndarray, Tensor]]:
        feats = self.features(table)
        return {a: (np.flatnonzero(table.agent == a), feats[a]) for a in self.agents}


class CentralCritic(Critic):
    """MAAC: one head on the joint observation (every agent's latest feature in the episode)."""

    def __init__(self, team: Team, agents: list[str], *, hidden: int = 64, lr: float = 1e-3, epochs: int = 8,
                 device: str = "cpu") -> None:
        self.device = torch.device(device)
        dim = sum(_feature_dim(team, a) + 1 for a in agents)
        super().__init__(team, agents, {"central": value_head(dim, hidden).to(self.device)}, lr, epochs)

    def inputs(self, table: SampleTable) -> dict[str, tuple[np.ndarray, Tensor]]:
        feats = {a: f.to(self.device) for a, f in self.features(table).items()}
        pos = {a: {int(i): j for j, i in enumerate(np.flatnonzero(table.agent == a))} for a in self.agents}
        blocks = {a: torch.zeros(len(table), feats[a].shape[1] + 1, device=self.device) for a in self.agents}
        episodes: dict[tuple, list[int]] = {}
        for i in range(len(table)):
            episodes.setdefault((table.task[i], int(table.episode[i])), []).append(i)
        for rows in episodes.values():
            latest: dict[str, int] = {}
            for i in sorted(rows, key=lambda r: int(table.step[r])):  # what every agent has seen so far
                latest[str(table.agent[i])] = i
                for agent, j in latest.items():
                    blocks[agent][i, :-1] = feats[agent][pos[agent][j]]
                    blocks[agent][i, -1] = 1.0
        return {"central": (np.arange(len(table)), torch.cat([blocks[a] for a in self.agents], dim=1))}


def make_critic(scheme: str, team: Team, agents: list[str], *, hidden: int, lr: float, epochs: int,
                device: str) -> Critic:
    """The critic of ``scheme`` ("iac": a head per agent, "maac": a central head)."""
    if scheme == "iac":
        return PerAgentCritic(team, agents, hidden=hidden, lr=lr, epochs=epochs)
    if scheme == "maac":
        return CentralCritic(team, agents, hidden=hidden, lr=lr, epochs=epochs, device=device)
    raise ValueError(f"scheme {scheme!r} has no critic (iac and maac do)")


def _feature_dim(team: Team, agent: str) -> int:
    config = team.model(agent).config
    return int(getattr(config, "hidden_size", 0) or config.get_text_config().hidden_size)
