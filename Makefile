# Set-up and everyday commands. Everything installs into ./.venv on first use.
#   make demo       generate a scenario and run the main job on embedded defaults
#   make test       the whole test suite (what CI runs), one test process per core
#   make test-fast  the suite without the slow integration tests
#   TEST_WORKERS=0 make test   the suite in this one process (pytest-xdist off)
#   make docs       build the documentation site (mkdocs.yml, docs/) into build/site
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Test processes (pytest-xdist): each takes whole test files, so a module's fixtures run once,
# and has its own Spark session; they take the files in the order tests/conftest.py gives (the
# most expensive first). 2 is this project's machines' core count.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: install chromium demo test test-fast bench docs clean

$(STAMP): requirements.txt constraints.txt pyproject.toml Makefile
	@command -v java >/dev/null || { echo "Java 17 is required by Spark: apt-get install openjdk-17-jre-headless"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(not (3, 11, 5) <= sys.version_info[:3] < (3, 12))' || { echo "Python 3.11.5 or a newer 3.11 is required (the pinned requirements need it); $(PYTHON) is $$($(PYTHON) -V 2>&1): set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt -c constraints.txt
	$(BIN)/pip install --quiet --no-deps -e .
	@# the bytecode of the pyspark.zip Spark's Python processes import (lklab/worker_bytecode.py)
	$(BIN)/python -m lklab.worker_bytecode
	@# the driver JVM's class-data archive (shared/jvm_archive.py): every command starts sooner
	$(BIN)/python -m lklab.class_archive || echo "no class-data archive: commands will start slower, and compute the same"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/lklab demo

# The report's browser tests open report.html in Debian's headless Chromium (no network): said at
# once, not by six failures at the end of the run.
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { echo "Chromium is needed by the report's browser tests: apt-get install -y chromium"; exit 1; }

test: install chromium
	$(PYTEST)

test-fast: install chromium
	$(PYTEST) -m "not slow"

bench: install
	$(BIN)/python benchmarks/generate_bench.py

docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

clean:
	rm -rf lake .pytest_cache build *.egg-info
