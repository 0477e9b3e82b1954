"""Benchmarks of Wayline against DBOS, procrastinate and pgbench on one private PostgreSQL
(``bench/run``).

Never imported by the engine or run by the test suite: performance is measured here,
side by side with what a user would pick instead, on the same machine and cluster.
"""
