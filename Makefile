# The two set-up commands of the README. `make setup` prepares a fresh Debian
# machine (virtualenv, package, Docker engine, images); `make test` runs the
# whole suite, Docker tests included.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: setup venv engine browser images test test-load test-unit test-docker test-agents bench gc demo

setup: venv engine browser images

venv:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,ray]'

engine:
	bash scripts/ensure-docker.sh

browser:
	bash scripts/ensure-browser.sh

images:
	$(BIN)/trialbox --log-level INFO images build

# The offline demo: every kind of agent, the scripted model server, the report.
demo:
	rm -rf runs/demo runs/demo-reproduced
	$(BIN)/trialbox tasks check examples/offline-demo.yaml
	$(BIN)/trialbox run examples/offline-demo.yaml --scripted-model examples/scripted-model.yaml --out runs/demo
	$(BIN)/trialbox report runs/demo --html runs/demo/report.html
	$(BIN)/trialbox reproduce runs/demo --scripted-model examples/scripted-model.yaml
	@echo "report: runs/demo/report.html"

test:
	bash scripts/ensure-docker.sh
	$(BIN)/python -m pytest tests

# Every agent preset built (its pinned download) and run through trialbox against the scripted model server.
test-agents:
	bash scripts/ensure-docker.sh
	$(BIN)/python -m pytest tests/docker/test_agents.py -m agents -v

# The whole suite again while busy containers and a container churn loop load the same engine and CPUs:
# verdicts must not depend on the host's load.
test-load:
	bash scripts/ensure-docker.sh
	bash scripts/with-load.sh $(BIN)/python -m pytest tests

test-unit:
	$(BIN)/python -m pytest tests/unit

test-docker:
	$(BIN)/python -m pytest tests/docker

bench:
	$(BIN)/python benchmarks/sandbox_lifecycle.py
	$(BIN)/python benchmarks/repo_ready.py
	$(BIN)/python benchmarks/recorded_exec.py
	$(BIN)/python benchmarks/ray_overhead.py
	$(BIN)/python benchmarks/taskcheck.py
	$(BIN)/python benchmarks/env_reuse.py
	$(BIN)/python benchmarks/coverage.py

gc:
	$(BIN)/trialbox gc
