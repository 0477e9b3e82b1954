"""Every SQL statement of the store, by name, one module per table family.

``leases`` (work rows: claims, the lease holder's writes, fenced transitions, sweeps),
``transitions`` (the ledger, history and instance writes of a commit), ``instances``
(history and instance reads), ``catalog`` (definitions), ``dead_letters`` (listing and
resolving them), ``work_views`` (operators' reads of work rows), ``workers``,
``sessions`` (which backend a connection is, the server's clock), ``migrations``
(the migrations ledger), ``snapshots``, ``retention`` (bounded history), ``holds``
(incident holds), ``bulk_commands``, ``principals`` (a principal's standing), ``roles``
(acting as a machine's database roles) and ``replication`` (a server's place in the
WAL). Statements are module constants built from shared fragments; the modules that
run them read them as ``module.NAME`` at each use, so a statement has one definition
and one name.
"""
