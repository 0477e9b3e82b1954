"""The model: what a workflow and its history are, independent of storage.

Definitions and their validation, events, an instance's replayed state, transitions,
limits and errors.
"""
