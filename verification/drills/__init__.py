"""The drills, one module per kind of fault: boundaries (D1-D4 at every boundary), leases
(D4, D5, D15, D16, D19), signals (D3 for clients, D6), network (D13), server (D10, D11,
D14), replay (D7), stateful (D9), unknowns (U1-U4), machines (M: state machines), code
(C: code-first workflows), holds (H1), operators (O1) and failover (F1);
``catalogue`` lists them all, ``base`` is what they share."""
