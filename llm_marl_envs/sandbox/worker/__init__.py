"""Code that runs inside the sandbox's fork-server processes (never in the caller).

Every module of this sub-package uses the standard library only and imports nothing from
the rest of ``llm_marl_envs``: the fork server loads this package straight from its files
(see :mod:`llm_marl_envs.sandbox.pool`), so the parent package's ``__init__`` (and anything
heavy it might import) never runs there. The caller imports only :mod:`.protocol`.
"""
