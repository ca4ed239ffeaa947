"""Deterministic behaviour detectors over trajectories, the recovery-rate table and the comparison of runs."""
