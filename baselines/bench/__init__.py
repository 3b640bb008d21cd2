"""Benchmarks: runnable modules that print a figure and a ratio against a reference measured in the same run."""
