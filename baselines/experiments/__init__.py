"""Experiments: paper reproductions at small scale and held-out learning runs (what a method learns).

Speed benchmarks (what a figure costs) live in :mod:`baselines.bench`; the two are kept apart so a
benchmark never depends on a learning result and an experiment never reads like a speed check.
"""
