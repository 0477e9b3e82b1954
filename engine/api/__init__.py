"""The engine's public API: what a program, the studio and the drills call.

``Client`` changes instances (start, signal, operator commands, publishing, migration),
``Queries`` reads what a console shows, ``BulkCommands`` previews and takes one action
on many instances, and ``Executions`` is the state machines' host surface (seed 000).
Everything here builds on the pure core (``engine.model``, ``engine.decide``) and the
store (``engine.store``); ``engine`` re-exports these names for users.
"""
