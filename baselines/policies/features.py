"""A prompt's feature vector: the model's final hidden state at the prompt's last token (for critics).

Rows are left-padded so every prompt ends in the last column; position ids count from each row's
first real token (as :mod:`baselines.policies.logprobs` does), so a row's features do not depend
on what else is in the batch. Computed without gradients, in float32.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


@torch.no_grad()
def last_hidden_states(model: nn.Module, prompt_ids: Sequence[Sequence[int]], *, pad_id: int,
                       batch_size: int | None = None) -> Tensor:
    """``(len(prompt_ids), hidden)`` float32 tensor on the model's device: the last layer's hidden state
    at each prompt's last token."""
    device = model.get_output_embeddings().weight.device
    if not prompt_ids:
        return torch.zeros(0, model.config.hidden_size, device=device)
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("empty prompt: a causal LM needs at least one token to give a feature")
    step = batch_size or len(prompt_ids)
    parts = []
    for start in range(0, len(prompt_ids), step):
        chunk = prompt_ids[start:start + step]
        width = max(len(p) for p in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, p in enumerate(chunk):
            ids[i, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p):] = 1
        ids, mask = ids.to(device), mask.to(device)
        out = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                    output_hidden_states=True, logits_to_keep=1, use_cache=False)
        parts.append(out.hidden_states[-1][:, -1].float())
    return torch.cat(parts)
