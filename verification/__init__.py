"""Wayline's verification harness: fault-injection drills that prove the engine's promises.

Entry points (the package itself imports nothing, so importing it stays cheap):

- ``verification.campaigns.run_drills(dsn, drills, profile, seed, progress_callback)``
  runs a campaign and records it; ``wayline drill run`` and the studio call it.
- ``verification.runs.list_runs(store)`` and ``verification.runs.get_run(store, id)``
  read recorded campaigns and their scorecards.
- ``verification.self_test.self_test(...)`` runs the drills against broken builds.

The mechanisms: ``proxy`` (a PostgreSQL wire proxy that cuts around COMMIT),
``fault_plan`` and ``processes`` (real worker subprocesses under a fault plan),
``effects`` (the effects ledger), ``lease_audit`` and ``observations`` (the harness's
own view of fencing and settlement), ``invariants`` (I1-I11), ``scorecard`` and
``reports`` (text, JSON, JUnit), ``drills/`` (the drills themselves).
"""
