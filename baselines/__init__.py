"""GRPO-family trainers for multi-LLM RL: sample table, advantage schemes, policy loss."""
