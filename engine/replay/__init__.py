"""Deterministic replay: the fold of history into an Instance, the lifecycle rules every
definition mode shares, and the checks a mode's own fold rules are written with."""
