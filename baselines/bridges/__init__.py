"""Torch-side bridges to other trainers: TRL's ``GRPOTrainer`` (:mod:`.trl`, :mod:`.trl_env`).

The torch-free bridges (OpenEnv server, verifiers) live in :mod:`llm_marl_envs.bridges`.
"""
