"""Worked examples: a user-defined loss benchmarked against the frozen baselines."""
