"""The studio's side of state machines: their executions' host operations (submit,
state, status, cancel) as the JSON API offers them, on the engine's ``Executions``
(``api``, ``service``, ``schemas``); the state diagram of a machine, what an
execution's page lays over it, and the diff of two machine versions.

``diagram`` lays a manifest out (pure, from the document, so a draft that does not
validate yet is drawn too); ``walk`` folds the edges an execution took and its failed
advances from history, beside the replay; ``overlay`` turns both into the classes,
titles and counts the page draws and its live updates swap; ``diff`` compares two
manifests by states, edges, timers and bounds.
"""
