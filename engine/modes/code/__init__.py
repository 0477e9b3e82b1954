"""Code-first workflows, the third definition mode (seed 001): an ``async def`` whose
durable verbs are journaled and which is replayed against its journal after every
park, crash or deploy. ``journal`` is the contract between its parts."""
