"""The drills, one module per kind of fault: boundaries (D1-D4 at every boundary), leases
(D4, D5, D15, D16, D19), signals (D3 for clients, D6), network (D13), server (D10, D11,
D14), replay (D7) and stateful (D9); ``catalogue`` lists them all, ``base`` is what they
share."""
