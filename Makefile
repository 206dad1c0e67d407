# The two commands a newcomer needs: `make lab` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.greenlab-installed

# Tests run the lessons in quick mode: real training, only smaller.
PYTEST_ARGS ?=
NBVAL := --nbval-lax --nbval-current-env --nbval-cell-timeout=300

.PHONY: lab test unit lessons notebooks check-notebooks benchmarks gpu-check clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

## make lab: install if needed, then JupyterLab on lessons/ (localhost only, token authentication)
lab: $(STAMP)
	$(VENV)/bin/jupyter lab lessons/ --ServerApp.ip=127.0.0.1 --ServerApp.open_browser=False

## make test: install if needed, then every unit test, the browser test and every lesson (quick mode)
test: $(STAMP)
	GREENLAB_QUICK=1 MPLBACKEND=Agg $(PY) -m pytest tests lessons $(NBVAL) -p no:cacheprovider $(PYTEST_ARGS)

unit: $(STAMP)
	GREENLAB_QUICK=1 MPLBACKEND=Agg $(PY) -m pytest tests -p no:cacheprovider $(PYTEST_ARGS)

lessons: $(STAMP)
	GREENLAB_QUICK=1 $(PY) -m pytest lessons $(NBVAL) -p no:cacheprovider $(PYTEST_ARGS)

## make notebooks: regenerate learner copies from lessons/instructor/
notebooks: $(STAMP)
	$(PY) -m greenlab.course build

check-notebooks: $(STAMP)
	$(PY) -m greenlab.course check

benchmarks: $(STAMP)
	$(PY) benchmarks/monitor_overhead.py
	$(PY) benchmarks/harness_overhead.py

## make gpu-check: every GPU check and reference recording, in one call (see benchmarks/gpu_suite.py)
gpu-check: $(STAMP)
	$(PY) benchmarks/gpu_suite.py --out artifacts/gpu

clean:
	rm -rf $(VENV) artifacts .pytest_cache
