"""Decisions: what an instance does next, as transitions.

The events decisions append (``decisions``), lifecycle, children and the audited
operator commands, shared by every definition mode; each mode's own decision (the
step list's orchestration walk, for one) is its part in ``engine.modes``.
"""
