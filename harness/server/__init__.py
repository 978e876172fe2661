"""A server process from start to verified-clean teardown: launch, leases, GPUs, reaping, its HTTP."""
