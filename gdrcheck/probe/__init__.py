"""``gdrcheck probe``: do on the node, small and bounded, what ``pairs`` predicts, and compare.

The plan (:mod:`plan`) is pure: it comes from the static report. Every step runs in
a spawned worker process (:mod:`runner`, :mod:`worker`) that alone loads
``libcuda.so.1``, ``libibverbs.so.1`` or ``libcufile.so.0`` through ctypes
(:mod:`cuda`, :mod:`verbs`, cuFile in :mod:`checks_gds`); the command's own process never does.
"""

CHECKS = ("cuda", "host-bandwidth", "p2p", "rdma-register", "rdma-loopback", "gds-read")
