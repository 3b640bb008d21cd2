"""Building blocks shared by every task: the base class, spaces, action sanitizing, records,
the parallel view, the vector envs and the factories."""

from llm_marl_envs.core.actions import Action, sanitize_action
from llm_marl_envs.core.parallel import MissingActionError, TextParallelEnv, UnknownAgentError
from llm_marl_envs.core.records import EpisodeRecord, StepRecord, TurnResult
from llm_marl_envs.core.spaces import FreeText, text_observation_space
from llm_marl_envs.core.text_env import Role, TextCollabEnv, TurnOutcome, render_chat
from llm_marl_envs.core.vector import SubprocTextVectorEnv, SyncTextVectorEnv, VectorEnvError, VectorStep
from llm_marl_envs.core.wrappers import TextEnvWrapper, make_env_fn, make_parallel_env_fn

__all__ = [
    "Action",
    "EpisodeRecord",
    "FreeText",
    "MissingActionError",
    "Role",
    "StepRecord",
    "SubprocTextVectorEnv",
    "SyncTextVectorEnv",
    "TextCollabEnv",
    "TextEnvWrapper",
    "TextParallelEnv",
    "TurnOutcome",
    "TurnResult",
    "UnknownAgentError",
    "VectorEnvError",
    "VectorStep",
    "make_env_fn",
    "make_parallel_env_fn",
    "render_chat",
    "sanitize_action",
    "text_observation_space",
]
