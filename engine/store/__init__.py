"""The PostgreSQL half of the engine: transitions, history, instances, work, dead letters."""
