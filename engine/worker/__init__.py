"""The worker: claim due work under leases, run activities, commit outcomes fenced by the lease."""
