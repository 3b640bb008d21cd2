"""Code-writing collaboration tasks (helper/main, tree search) and their shared pieces.

Shared, stable pieces other tasks reuse: :mod:`llm_marl_envs.code.extract` (code out of an
LLM answer) and :mod:`llm_marl_envs.code.ast_checks` (AST facts about a program).
"""

from llm_marl_envs.code.extract import ExtractedCode, extract_code, parses

__all__ = ["ExtractedCode", "extract_code", "parses"]
