"""Building blocks shared by every task: the base class, spaces, action sanitizing, records,
the parallel view, the vector envs and the factories."""

from llm_marl_envs.core import text_batching  # noqa: F401  (registers FreeText with Gymnasium's utilities)
from llm_marl_envs.core.actions import Action, sanitize_action
from llm_marl_envs.core.cycles import NOOP_ACTION, noop_when_idle
from llm_marl_envs.core.parallel import MissingActionError, TextParallelEnv, UnknownAgentError
from llm_marl_envs.core.records import EpisodeRecord, StepRecord, TurnResult
from llm_marl_envs.core.spaces import FreeText, text_observation_space
from llm_marl_envs.core.text_batching import BatchedFreeText, TextNotFlattenableError
from llm_marl_envs.core.text_env import Role, TextCollabEnv, TurnOutcome, render_chat
from llm_marl_envs.core.vector import SubprocTextVectorEnv, SyncTextVectorEnv, VectorEnvError, VectorStep
from llm_marl_envs.core.wrappers import TextEnvWrapper, make_env_fn, make_parallel_env_fn

__all__ = [
    "NOOP_ACTION",
    "Action",
    "BatchedFreeText",
    "EpisodeRecord",
    "FreeText",
    "MissingActionError",
    "Role",
    "StepRecord",
    "SubprocTextVectorEnv",
    "SyncTextVectorEnv",
    "TextCollabEnv",
    "TextEnvWrapper",
    "TextNotFlattenableError",
    "TextParallelEnv",
    "TurnOutcome",
    "TurnResult",
    "UnknownAgentError",
    "VectorEnvError",
    "VectorStep",
    "make_env_fn",
    "make_parallel_env_fn",
    "noop_when_idle",
    "render_chat",
    "sanitize_action",
    "text_observation_space",
]
