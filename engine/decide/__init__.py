"""Decisions: what an instance does next, as transitions.

Orchestration, lifecycle, children and the audited operator commands.
"""
