"""Generation backends: sample completions for a team of agents, with their log-probs.

``TransformersBackend`` (always available) batches ``model.generate`` per policy;
``VLLMBackend`` (``baselines.generation.vllm_backend``, needs vllm and a GPU) is optional.
"""

from baselines.generation.transformers_backend import TransformersBackend
from baselines.generation.types import GenerationConfig, GenOutput, GenRequest

__all__ = ["GenOutput", "GenRequest", "GenerationConfig", "TransformersBackend"]
