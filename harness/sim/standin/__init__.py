"""The stand-in of the reference server: its scheduler child without PyTorch, for tests of search logic.

The reference server (harness.sim) is itself a model of SGLang; the stand-in is a model of that model. With
``--sim-scheduler standin`` (build knob ``scheduler=standin``) the reference server's own front, HTTP API,
flags, warm-up, health checks and log lines run unchanged (harness.sim.server, http_api, cli_args,
server_settings, scheduler_client, sim_logging, sigterm, process_tree), and only the scheduler child differs:
it computes tokens by a deterministic cheap rule instead of a tiny transformer, so it starts in a fraction of a
second and imports no torch. It keeps the reference server's pass/fail and acceptance behaviour for what the
search tests turn (the revision, the step cost, the demo history's random crash and syntax error): at
``pre-fix`` the eager draft inherits the prefill's ``out_cache_loc`` under the same conditions and raises
PyTorch's message from frames named as the reference server's (so the catalogue's signature matches); at
``post-fix`` it is dropped. What it does not model it refuses at start (the CUDA-graph draft's SWA refill), so a
test never passes on it by accident. ``tests/sim/test_standin_contract.py`` holds it to the reference
server's HTTP and log contract.
"""

__all__ = ["cuda_graph_buffer_registry", "model_runner", "scheduler"]
