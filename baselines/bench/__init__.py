"""Benchmarks: runnable modules that print a figure and a ratio against a reference measured in the same run.

Speed and memory only; what a method learns (paper reproductions, held-out training) lives in
:mod:`baselines.experiments`.
"""
