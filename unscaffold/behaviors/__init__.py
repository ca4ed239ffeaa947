"""Deterministic behaviour detectors over trajectories, and (later) the recovery-rate table."""
