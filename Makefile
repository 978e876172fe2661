# make demo: three cases before/after the fix on the CPU reference server, with reports: the eager draft's crash
# (#28264), the graph draft's crash on trtllm_mha (#29021) and a case that passes on both sides (a metric verdict).
# make demo-full: every case of the #28264 scenario.
# make demo then shows the eager crash on real SGLang: real 0.5.14 -> real 0.5.15 on the real-SGLang CPU build (real
# SGLang, plain-torch kernels on CPU, a tiny Gemma-4 pair made at run time), its environments made once into the cache.
# make test: the harness's own tests (CPU only; real-GPU items are skipped with a reason).
VENV      ?= .venv
PYTHON    ?= python3
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.installed
PIP       := $(PY) -m pip install -q --disable-pip-version-check -c .ci/constraints.txt
# INSTALLER=uv (the default): uv (pinned) installs the same packages from the same constraints (pip freeze compared
# equal), about 4x faster from a fresh clone here: install + make demo's first report 61-66 s against pip's 251 s (warm
# caches, this shared 2-core machine at load ~12, run at nice -15; uv's install 8 CPU-s against pip's 66). The default
# since a cold `make demo` measured pip's install at 218 s of its 7 minutes (benchmarks/bench_make_demo.py). uv goes
# into $(VENV)/.uv, outside the venv's site-packages; it reads no pip configuration, so pip's find-links (its
# configuration or $PIP_FIND_LINKS: where these machines keep the CPU build of torch; without them uv takes the CUDA
# build, 3 GB) are handed on. Where uv cannot be installed or fails, plain pip is used; INSTALLER=pip asks for pip.
INSTALLER ?= uv
UV_VERSION ?= 0.13.9
UV_LINKS  = $(shell { $(PYTHON) -m pip config get global.find-links 2>/dev/null; echo "$$PIP_FIND_LINKS"; } \
              | tr ' ' '\n' | sed '/^$$/d' | sort -u | sed 's/^/--find-links /')
UV        = $(VENV)/.uv/bin/uv pip install -q --python $(PY) -c .ci/constraints.txt $(UV_LINKS)
DEMO      ?= scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml
DEMO_GRAPH ?= scenarios/frozen_kv_mtp/trtllm_swa_nvfp4_graph_draft.yaml
# A crashing trial costs a fresh server, and a crash removed needs no statistics: the two crash cases run one trial,
# the passing case the five a metric verdict needs (its trials share one server per role).
DEMO_CRASH_TRIALS ?= 1
# The metric case's ten trials with half the traffic each (two requests of 16 new tokens): the verdict and its interval
# are the point, not their width. `--set` is the same override a user passes to point a scenario at a GPU.
DEMO_LIGHT ?= --set workload.requests=2 --set workload.max_new_tokens=16
# Five trials per role: the fewest with which a rank test can reach alpha 0.01, so the demo gives metric verdicts.
DEMO_TRIALS ?= 5
PYTEST_ARGS ?=
# Three workers on two cores: with two, the CPUs sat idle a quarter of the time while tests waited (SLURM's
# shortest time limit is a minute; the 20% slowdown's steps sleep 250 ms; servers start in spawned children). In fresh
# clones here, cold: -n 2 kept the CPUs 73% busy and took 805 s of pytest; -n 3 kept them ~97% busy, 658 s.
PYTEST_WORKERS ?= 3
# The real-SGLang CPU builds (pip:sglang==X,deps=cpu) the live tests serve from, and the two the demo runs; each is made
# once into $$SGLANG_REPRO_CACHE (about 40 s a release with uv, empty caches, load 5-8; the two at once share uv's
# cache), with the tiny models.
SGLANG_CPU_RELEASES ?= 0.5.14 0.5.15 0.5.21
DEMO_CPU_RELEASES ?= 0.5.14 0.5.15

.PHONY: demo demo-full test lint install sglang-envs sglang-cpu-envs clean

install: $(STAMP)

$(STAMP): pyproject.toml .ci/constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if [ "$(INSTALLER)" = uv ] && { test -x $(VENV)/.uv/bin/uv || $(PIP) --target $(VENV)/.uv uv==$(UV_VERSION); }; then \
	  echo "make install: uv $(UV_VERSION)"; \
	  $(UV) torch==2.13.0 && $(UV) -e '.[sim,test,lint]' \
	  || { echo "make install: uv failed; installing with pip" >&2; $(PIP) torch==2.13.0 && $(PIP) -e '.[sim,test,lint]'; }; \
	else \
	  $(PIP) torch==2.13.0 && $(PIP) -e '.[sim,test,lint]'; \
	fi
	touch $(STAMP)

# Real sglang releases installed --no-deps (flag parsing and bench_serving only: no GPU stack); 0.5.23, the newest
# here, for the flags of `issue`'s launch commands (tests/upstream).
sglang-envs: $(STAMP)
	$(PY) -m harness prepare 'pip:sglang==0.5.14,deps=none' 'pip:sglang==0.5.15,deps=none' 'pip:sglang==0.5.23,deps=none'

# Real sglang releases that serve on the CPU (plain-torch kernels; harness.build.sglang_cpu), and the tiny models.
# One preparation per release at once (each mostly unpacks wheels), then the tiny models. They install with uv (pinned,
# put beside the venv as INSTALLER=uv does; harness.build.sglang_cpu.installer), with pip where uv cannot be had:
# a release's environment in 10-42 s against pip's 102 s here (load 4-8), a sixth of pip's CPU.
sglang-cpu-envs: $(STAMP)
	@test -x $(VENV)/.uv/bin/uv || $(PIP) --target $(VENV)/.uv uv==$(UV_VERSION) \
	  || echo "make sglang-cpu-envs: uv $(UV_VERSION) cannot be installed; the environments are made with pip" >&2
	@pids=; for v in $(SGLANG_CPU_RELEASES); do $(PY) -m harness prepare "pip:sglang==$$v,deps=cpu" & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; [ $$rc -eq 0 ] || exit 1; \
	$(PY) -m harness prepare 'pip:sglang==$(lastword $(SGLANG_CPU_RELEASES)),deps=cpu' tiny:gemma4 tiny:llama

# The reference server's three comparisons first (the fast first screen) while the two real-SGLang CPU builds are made
# beside them (once; cached), then the eager crash on real SGLang: real 0.5.14 crashes, real 0.5.15 passes.
demo: $(STAMP)
	@$(MAKE) --no-print-directory sglang-cpu-envs SGLANG_CPU_RELEASES='$(DEMO_CPU_RELEASES)' \
	  > $(VENV)/sglang-cpu-envs.log 2>&1 & envs=$$!; \
	$(PY) -m harness compare $(DEMO) --case tokens=276,path=eager --reference --trials $(DEMO_CRASH_TRIALS) \
	&& $(PY) -m harness compare $(DEMO_GRAPH) --reference --trials 1 \
	&& $(PY) -m harness compare $(DEMO) --case tokens=276,path=graph --reference --trials $(DEMO_TRIALS) $(DEMO_LIGHT); \
	rc=$$?; wait $$envs || { echo "preparing the real-SGLang CPU builds failed; see $(VENV)/sglang-cpu-envs.log" >&2; \
	  tail -n 20 $(VENV)/sglang-cpu-envs.log >&2; exit 1; }; \
	[ $$rc -eq 0 ] || exit $$rc; \
	$(PY) -m harness compare $(DEMO) --case tokens=276,path=eager --cpu --trials 1

demo-full: $(STAMP)
	$(PY) -m harness compare $(DEMO) --reference --trials $(DEMO_TRIALS)

# Lint and type checks (CI runs them before the tests).
lint: $(STAMP)
	$(PY) -m ruff check harness tests benchmarks conftest.py
	$(PY) -m mypy

# The two sglang environments are prepared beside the first tests, not before them: a test that needs one
# waits on that environment's lock (harness.build.ensure_pip_env) while the others run. The preparation's
# output goes to $(VENV)/sglang-envs.log; a failed preparation fails the target even if pytest passed.
test: $(STAMP)
	@echo "make test: the whole suite, about 30-35 min on 2 cores: a fresh machine took 2047 s of pytest (docs/tests.md)"
	@echo "make test: meanwhile, in the background, it fetches the sglang wheels (pip, --no-deps) and builds the real-SGLang"
	@echo "  CPU environments (about 100 s each the first time; cached): logs in $(VENV)/sglang-envs.log, $(VENV)/sglang-cpu-envs.log"
	@$(MAKE) --no-print-directory sglang-envs > $(VENV)/sglang-envs.log 2>&1 & envs=$$!; \
	$(MAKE) --no-print-directory sglang-cpu-envs > $(VENV)/sglang-cpu-envs.log 2>&1 & cpu_envs=$$!; \
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS); rc=$$?; \
	wait $$envs || { echo "preparing the sglang environments failed; see $(VENV)/sglang-envs.log" >&2; \
	  tail -n 20 $(VENV)/sglang-envs.log >&2; [ $$rc -ne 0 ] || rc=1; }; \
	wait $$cpu_envs || { echo "preparing the real-SGLang CPU builds failed; see $(VENV)/sglang-cpu-envs.log" >&2; \
	  tail -n 20 $(VENV)/sglang-cpu-envs.log >&2; [ $$rc -ne 0 ] || rc=1; }; \
	exit $$rc

clean:
	rm -rf $(VENV) reports/runs reports/compare
