"""Math collaboration tasks (solver/verifier) with seeded problem generators and GSM8K / MATH loaders.

Answers are checked with ``math-verify`` (``pip install 'llm-marl-envs[math]'``).
"""
