"""A generator of synthetic multi-hop QA worlds: invented entities, encyclopedia passages, chained questions.

See :mod:`llm_marl_envs.data.multihop.world` for what is generated and guaranteed, and
:mod:`llm_marl_envs.data.multihop.relations` for the facts and how they are phrased.
"""

from llm_marl_envs.data.multihop.relations import RELATIONS, Relation, parse_subquestion
from llm_marl_envs.data.multihop.world import Entity, World, WorldConfig, generate_world

__all__ = ["RELATIONS", "Entity", "Relation", "World", "WorldConfig", "generate_world", "parse_subquestion"]
