# Two entry points for a fresh machine: `make demo` and `make test`. Both set everything up.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
EXTRAS := local,server,openai,anthropic,mini,ray,dev,release
# llama-cpp-python compiles from source; a native build crashes on CPUs unlike the build host.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

# Agent CLIs run by the adapters (verified live with these versions; see README).
TOOLS ?= .tools
CLI_PACKAGES := @anthropic-ai/claude-code@2.1.197 @openai/codex@0.169.0 @google/gemini-cli@0.61.0

.PHONY: setup clis demo test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	bash scripts/install-system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	# byte-compile now, as pip does for a wheel: with PYTHONDONTWRITEBYTECODE set, an editable
	# install would otherwise compile every module from source in every process it starts
	$(PY) -m compileall -q src
	touch $@

clis: $(TOOLS)/.installed

$(TOOLS)/.installed: Makefile scripts/install-clis.sh
	bash scripts/install-clis.sh $(TOOLS) $(CLI_PACKAGES)
	touch $@

# Fast parts first: doctor without its live CLI runs (`metaeval doctor` does them), then the
# demo, whose first part (the audit's checks, no model) reports within seconds.
demo: setup
	METAEVAL_DOCTOR_LIVE=0 $(VENV)/bin/metaeval doctor
	$(VENV)/bin/metaeval demo --run-dir runs/demo
	@echo "reports: runs/demo/{audit/report.html,improve/bundle/report.html,buildfind/report.html,qa/report.md}"

test: setup clis
	bash scripts/container-base-image.sh  # offline Podman base image for the container tests (cached)
	METAEVAL_MODEL_CACHE=$${METAEVAL_MODEL_CACHE:-$$HOME/.cache/metaeval/gguf} METAEVAL_REQUIRE_CONTAINER=$${METAEVAL_REQUIRE_CONTAINER:-1} METAEVAL_REQUIRE_BWRAP=$${METAEVAL_REQUIRE_BWRAP:-1} METAEVAL_REQUIRE_EXTRAS=$${METAEVAL_REQUIRE_EXTRAS:-1} $(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy  # src/, configured in pyproject.toml [tool.mypy]
	$(PY) scripts/code_shape.py  # modules <= 700 lines, folders <= 20 modules, no cycle, no layer break

bench: setup
	$(PY) bench/orchestration_overhead.py
	$(PY) bench/local_model_speed.py
	$(PY) bench/audit_static_checks.py
	$(PY) bench/buildfind_analysis.py --skip-individual
	$(PY) bench/improve_evaluation.py
	$(PY) bench/improve_mini_shim.py
	$(PY) bench/gateway_overhead.py
	$(PY) bench/executor_scaling.py

clean:
	rm -rf $(VENV) runs $(TOOLS)
