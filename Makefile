# callback-kit: every target bootstraps what it needs on a fresh machine.
SHELL := /bin/bash
ENV ?= dev
# Lambda runs python3.13; use the same interpreter here (pyenv's 3.13 where present).
PYTHON ?= $(shell p=$$(pyenv prefix 3.13.0 2>/dev/null) && echo $$p/bin/python3 || command -v python3.13)
VENV := .venv
SAM_VENV := .venv-sam
LAMBDA_VENV := .venv-lambda
SCAN_VENV := .venv-scan
PY := $(VENV)/bin/python
SAM := SAM_CLI_TELEMETRY=0 PATH="$(dir $(PYTHON)):$$PATH" $(SAM_VENV)/bin/sam
export AWS_DEFAULT_REGION ?= us-east-1

.PHONY: install lint test build smoke invoke bench bench-concurrency bench-extract bench-recovery bench-engines chaos demo local preflight deploy redrive scan clean lock openapi

install: $(VENV)/.installed $(SAM_VENV)/.installed $(LAMBDA_VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements.lock src/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c requirements.lock -e ".[dev]"
	touch $@

# SAM CLI pins its own cfn-lint; it lives in its own environment.
$(SAM_VENV)/.installed: requirements-sam.lock
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet -r requirements-sam.lock
	touch $@

# Lambda's python3.13 runtime, offline: CPython 3.13 with boto3 and the durable execution SDK (Lambda's runtime carries
# one "for testing and development"), nothing else. The offline cloud runs every function's `sam build` artifact on
# it, so a module missing from the package fails here as it would on AWS.
$(LAMBDA_VENV)/.installed: requirements.lock $(VENV)/.installed
	$(PYTHON) -m venv --without-pip $(LAMBDA_VENV)
	$(PY) -m pip --python $(LAMBDA_VENV)/bin/python install --quiet -c requirements.lock boto3 aws-durable-execution-sdk-python
	touch $@

# checkov in its own environment: it pins dependencies of its own, and only `make scan` needs it.
$(SCAN_VENV)/.installed: requirements-scan.txt
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/pip install --quiet -r requirements-scan.txt
	touch $@

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(SAM) validate --lint --template template.yaml
	$(PY) -m localcloud.aslcheck statemachines/*.asl.json

test: install
	$(PY) -m pytest

build: $(SAM_VENV)/.installed
	$(SAM) build --template template.yaml

# The packages prove themselves: every function's sam build artifact imports its handler on the clean Lambda runtime
# interpreter (python3.13 + boto3) and runs its sample events against the offline cloud.
smoke: install
	$(PY) -m pytest -q tests/workflows/test_events_replay.py

# `sam local invoke` without Docker: make invoke FUNCTION=RegisterTokenFunction EVENT=events/register_token.register.json
# On the running `make local` when there is one, else a fresh cloud (stderr says which); stdout is only the response,
# so nothing else goes there (recipe lines unechoed, a first run's install on stderr): `make invoke ... > out.json`
# is JSON. `python -m localcloud invoke --help` lists the functions.
invoke:
	@$(MAKE) --no-print-directory install >&2
	@$(PY) -m localcloud invoke $(FUNCTION) $(if $(EVENT),-e $(EVENT))

# The reports import the functions' code (src/) as the tests do (pyproject's pythonpath).
bench bench-concurrency bench-extract bench-recovery bench-engines chaos: export PYTHONPATH := src

# The design's numbers on the offline cloud (P1-P5 and HTTP in bench/bench.py): docs/performance.md, .aws-sam/bench/.
# A report, not a test; SIZES=500,1000,2000,5000 by default.
bench: install
	$(PY) -m bench.bench $(if $(SIZES),--sizes $(SIZES))

bench-concurrency: install
	$(PY) -m bench.concurrency

# 200 documents in 4 batches under a BDA quota of 5: peak jobs, refusals, efficiency; callback vs polling per document.
bench-extract: install
	$(PY) -m bench.extract

# A burst of BURST lost completion events (100 by default), tasks waiting with HEARTBEAT real seconds (6); DESCRIBE=1:
# Translate cannot list them, each is described on its own (as Macie, BDA, HealthLake jobs are). Timeouts
# and recovery time (docs/callback.md, "Under pressure"; .aws-sam/bench/recovery.json).
bench-recovery: install
	$(PY) -m bench.recovery $(if $(BURST),--jobs $(BURST)) $(if $(HEARTBEAT),--heartbeat $(HEARTBEAT)) $(if $(DESCRIBE),--describe)

# The documents workflow on both engines, Step Functions and a Lambda durable function: requests counted per task and
# priced (docs/callback.md, "Two engines"; .aws-sam/bench/engines.json).
TASKS ?= 20
bench-engines: install
	$(PY) -m bench.engines --tasks $(TASKS)

# Callback jobs under seeded random faults (wire faults in the Lambda workers, lost/early/duplicated/late/forged
# events): lost, double, wrong and dead-lettered jobs (docs/reliability.md, .aws-sam/bench/chaos.json).
# WIRE='{"throttle": 0.3, "crash": 0}' replaces the wire faults' probabilities.
JOBS ?= 1000
SEED ?= 7
chaos: install
	$(PY) -m bench.chaos --jobs $(JOBS) --seed $(SEED) $(if $(WIRE),--wire '$(WIRE)')

# The app's demo (tools/demo.py), on the offline cloud.
demo: install
	$(PY) -m tools.demo

# The offline cloud, with the app's sample documents where the README's documents task reads them.
local: install
	$(PY) -m localcloud serve --seed tools.demo.sample_documents

# Read-only checks of the target account and Region (tools/preflight.py): one line per finding, with its fix; exits 1
# when a finding blocks the deploy or a feature's first run.
preflight: $(VENV)/.installed
	$(PY) -m tools.preflight --config-env $(ENV)

deploy: build preflight
	$(SAM) deploy --config-env $(ENV)

# Static security scan of the template (not in CI): checkov (the checks skipped on purpose, and why: .checkov.yaml)
# and cfn-lint with the serverless rules (its two findings, both deliberate: docs/security.md).
scan: $(SCAN_VENV)/.installed
	$(SCAN_VENV)/bin/checkov --config-file .checkov.yaml -f template.yaml
	$(SCAN_VENV)/bin/cfn-lint --append-rules cfn_lint_serverless.rules --ignore-checks WS1004 ES6000 -- template.yaml

# Replay the deployed stack's dead letters (tools/redrive.py): failed async invocations and undeliverable events are
# invoked again with their original event, queue messages go back to their queue; only what succeeded is deleted.
STACK ?= callback-kit-$(ENV)
redrive: $(VENV)/.installed
	$(PY) -m tools.redrive --stack-name $(STACK)

# Regenerate docs/openapi.json from the API's models (a test fails when the committed copy drifts).
openapi: $(VENV)/.installed
	cd src && TASK_TABLE=t TASK_RESULT_BUCKET=bucket TASK_LOG_RETENTION_DAYS=1 TASK_STATE_MACHINES='{}' TASK_DURABLE_FUNCTIONS='{}' \
	  ../$(PY) -c 'from handlers.task_api import openapi_document; print(openapi_document())' > ../docs/openapi.json

# Re-resolve the pinned dependencies (run after changing pyproject.toml).
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet -e ".[dev]"
	.venv-lock/bin/pip freeze --exclude-editable | grep -v '^-e' > requirements.lock
	rm -rf .venv-lock

clean:
	rm -rf $(VENV) $(SAM_VENV) $(LAMBDA_VENV) $(SCAN_VENV) .aws-sam .mypy_cache .ruff_cache .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
