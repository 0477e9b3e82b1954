"""State machines' executions: the host operations (submit, state, status, cancel) as
the JSON API offers them, on the engine's ``Executions``."""
