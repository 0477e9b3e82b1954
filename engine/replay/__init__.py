"""Deterministic replay: the fold of history into an Instance, and its per-kind rules."""
