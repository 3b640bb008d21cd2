"""The fork server's import path and site builtins, set up without running :mod:`site`.

Fork servers start with ``python -I -S``. Under ``-S`` Python skips :mod:`site`, which
would otherwise run the ``import`` lines of the ``.pth`` files in site-packages: in an
editable install, as the README's, that is a finder that imports ``pathlib``, ``urllib`` and
``ipaddress``. Every page of the fork server's heap has its page-table entry copied at each
fork and dropped at each exit. Without that code, the heap is ~0.7 MB smaller, which gave about
2 % more jobs per second on HumanEval (docs/benchmarks.md).

What :func:`set_up_import_path` gives a job, as ``site`` would: the interpreter's
site-packages directories on ``sys.path`` (those of the base installation too when a
virtual environment includes them), the directories listed on the path lines of their
``.pth`` files, and the builtins ``exit``, ``quit``, ``help``, ``copyright``, ``credits``
and ``license``. What it leaves out: the ``import`` lines of ``.pth`` files (so a package
installed in editable mode through an import hook cannot be imported by jobs),
``sitecustomize``, and the user site (``-I`` excludes it anyway).
"""

from __future__ import annotations

import os
import site
import sys


def set_up_import_path() -> None:
    """Put site-packages and the ``.pth`` path entries on ``sys.path``; define ``exit`` & co."""
    known = {_case(p) for p in sys.path}
    prefixes = _prefixes()
    site.PREFIXES[:] = prefixes  # what site.getsitepackages() then answers in a job, as after site.main()
    site.ENABLE_USER_SITE = False  # -I
    for directory in site.getsitepackages(prefixes):
        if os.path.isdir(directory):
            _add(directory, known)
            for path in _pth_paths(directory):
                _add(path, known)
    site.setquit()
    site.setcopyright()
    site.sethelper()


def _prefixes() -> list[str]:
    """The prefixes whose site-packages count, as ``site.venv`` decides (and sets ``sys.prefix``)."""
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    config = _venv_config(exe_dir)
    if config is None:
        return [sys.prefix, sys.exec_prefix]
    sys.prefix = sys.exec_prefix = os.path.dirname(exe_dir)  # the virtual environment's root
    if config.get("include-system-site-packages", "false").lower() == "true":
        return [sys.prefix, sys.base_prefix, sys.base_exec_prefix]
    return [sys.prefix]


def _venv_config(exe_dir: str) -> dict[str, str] | None:
    """The settings in the ``pyvenv.cfg`` next to the interpreter or one level up, if any."""
    for candidate in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(os.path.dirname(exe_dir), "pyvenv.cfg")):
        try:
            with open(candidate, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        config = {}
        for line in lines:
            key, sep, value = line.partition("=")
            if sep:
                config[key.strip().lower()] = value.strip()
        return config
    return None


def _pth_paths(directory: str) -> list[str]:
    """The directories named on the path lines of ``directory``'s ``.pth`` files, in site's order."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".pth") and not n.startswith("."))
    except OSError:
        return []
    paths = []
    for name in names:
        try:
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            if not line.strip() or line.startswith("#") or line.startswith(("import ", "import\t")):
                continue
            path = os.path.abspath(os.path.join(directory, line.rstrip()))
            if os.path.exists(path):
                paths.append(path)
    return paths


def _add(path: str, known: set[str]) -> None:
    key = _case(path)
    if key not in known:
        known.add(key)
        sys.path.append(path)


def _case(path: str) -> str:
    return os.path.normcase(os.path.abspath(path)) if path else path
