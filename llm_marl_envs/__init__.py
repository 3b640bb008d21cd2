"""llm-marl-envs: PettingZoo environments for training teams of cooperating LLMs.

Every task is a Dec-POMDP: each agent sees only its own observation, the team gets one
joint reward. ``make(name)`` builds any registered task; ``list_envs()`` lists them.
"""

from llm_marl_envs.registry import (
    EnvSpec,
    UnknownEnvironmentError,
    list_envs,
    make,
    make_parallel,
    register,
    registry,
    spec,
)

__version__ = "0.1.0"

__all__ = [
    "EnvSpec",
    "UnknownEnvironmentError",
    "__version__",
    "list_envs",
    "make",
    "make_parallel",
    "register",
    "registry",
    "spec",
]
