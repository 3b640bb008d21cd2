"""Tests of llm_marl_envs.sandbox."""
