"""Search tasks: retrieval-augmented QA split across a planner, search workers and an answerer.

The environment is :mod:`llm_marl_envs.search.planner_worker_v0`; the helpers here parse
the agents' tags (:mod:`.tags`), normalize and score answers (:mod:`.answers`) and compute
the reward components and counterfactual re-scoring (:mod:`.reward`).
"""

from llm_marl_envs.search.answers import exact_match, f1_score, normalize_answer, score_answer

__all__ = ["exact_match", "f1_score", "normalize_answer", "score_answer"]
