# The two commands a newcomer needs: `make lab` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.greenlab-installed

# Tests run the lessons in quick mode: real training, only smaller, offline (GREENLAB_DOWNLOAD=0).
# Tests and the lab kernels choose PyTorch's threads the same way (gl.setup(), greenlab/session/threads.py),
# with OpenMP's threads sleeping instead of spinning while they wait for each other: spinning
# threads on a core another program holds slowed a run several-fold. OpenMP reads the setting once,
# when PyTorch loads, so it has to be in the environment the kernel starts with.
OMP_WAIT_POLICY ?= PASSIVE
# torch.compile's on-disk cache gets one folder per CPU-capability setting: its keys do not include
# ATEN_CPU_CAPABILITY or ONEDNN_MAX_CPU_ISA, and code built under one computed NaN under the other.
INDUCTOR_CACHE := $(CURDIR)/.cache/inductor-$(or $(ATEN_CPU_CAPABILITY),default)-$(or $(ONEDNN_MAX_CPU_ISA),default)
TEST_ENV := GREENLAB_QUICK=1 GREENLAB_DOWNLOAD=0 OMP_WAIT_POLICY=$(OMP_WAIT_POLICY) MPLBACKEND=Agg TORCHINDUCTOR_CACHE_DIR=$(INDUCTOR_CACHE)
PYTEST_ARGS ?=
# make lab: your own copy of the lessons (git-ignored; make test never checks it), extra
# JupyterLab options (e.g. LAB_ARGS="--port=8890 --ServerApp.open_browser=True"); root needs --allow-root.
LAB_DIR  ?= my-lessons
LAB_ARGS ?=
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
# AMD GPUs are measured through amdsmi, which needs ROCm: installed where ROCm is. (Apple Silicon's
# counters come with zeus-apple-silicon, a dependency only on Apple Silicon Macs.)
comma := ,
EXTRAS := $(if $(wildcard /opt/rocm),$(comma)amd,)
# make lab and make test install the whole course: the lean core plus every extra pyproject.toml names
# (JupyterLab and its side panel, the packages single lessons use, nbgrader, the test tools)
MAKE_EXTRAS := lab,lowbit,scheduling,grading,test
NBVAL := --nbval-lax --nbval-current-env --nbval-cell-timeout=300

.PHONY: lab my-lessons test unit lessons notebooks check-notebooks site results benchmarks gpu-check clean

$(STAMP): pyproject.toml constraints.txt
	@echo "greenlab: installing into $(VENV): PyTorch, JupyterLab and the test tools (several GB the first time,"
	@echo "greenlab: a few minutes; pip shows its progress below). Without an NVIDIA driver the CPU-only PyTorch is chosen."
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) greenlab/base/torch_install.py --constraints constraints.txt
	$(PY) -m pip install -c constraints.txt -e '.[$(MAKE_EXTRAS)$(EXTRAS)]'
	touch $(STAMP)

## make lab: install if needed, copy the lessons to my-lessons/ (missing ones only, nothing is
## overwritten), then JupyterLab on my-lessons/ (localhost only, token authentication)
lab: $(STAMP) my-lessons
	OMP_WAIT_POLICY=$(OMP_WAIT_POLICY) $(VENV)/bin/jupyter lab $(LAB_DIR)/ --ServerApp.ip=127.0.0.1 --ServerApp.open_browser=False $(ROOT_FLAG) $(LAB_ARGS)

# each copy carries this machine's kernel metadata, so opening it does not mark it modified
my-lessons:
	@GREENLAB_LESSONS_DIR=$(CURDIR)/lessons $(PY) -m greenlab.cli lab --dir $(LAB_DIR) --copy-only

## make test: install if needed, then every unit test, the browser test and every lesson (quick mode):
## each learner copy in a Jupyter kernel (nbval: stubs, widgets, checked outputs), each instructor copy
## headless with the optional packages hidden (tests/test_minimal_env.py: solutions, text stand-ins)
test: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest tests lessons --ignore=lessons/instructor $(NBVAL) -p no:cacheprovider --durations=20 $(PYTEST_ARGS)

unit: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest tests -p no:cacheprovider $(PYTEST_ARGS)

## make lessons: both copies of every lesson in a Jupyter kernel (for lesson authors)
lessons: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest lessons $(NBVAL) -p no:cacheprovider $(PYTEST_ARGS)

## make notebooks: regenerate learner copies from lessons/instructor/
notebooks: $(STAMP)
	$(PY) -m greenlab.course build

check-notebooks: $(STAMP)
	$(PY) -m greenlab.course check

## make site: the course as a website (every learner copy, an index, Colab/Binder links), offline;
## SITE_ARGS=--execute runs every lesson first, so the pages show one run's outputs
site: $(STAMP)
	$(PY) -m greenlab.course.website --out artifacts/site $(SITE_ARGS)

## make results: every lesson headless in the mode this machine gives a learner, each lesson's headline
## (factor, interval, repeats, energy source, load) in one table: results/course/results.{md,csv,json}
## (RESULTS_ARGS="--quick" for CI's sizes; name notebooks to run only those)
RESULTS_ARGS ?=
results: $(STAMP)
	OMP_WAIT_POLICY=$(OMP_WAIT_POLICY) MPLBACKEND=Agg TORCHINDUCTOR_CACHE_DIR=$(INDUCTOR_CACHE) $(PY) -m greenlab.course results $(RESULTS_ARGS)

benchmarks: $(STAMP)
	$(PY) benchmarks/monitor_overhead.py
	$(PY) benchmarks/harness_overhead.py

## make gpu-check: every GPU check and reference recording, in one call (see benchmarks/gpu_suite.py)
gpu-check: $(STAMP)
	$(PY) benchmarks/gpu_suite.py --out artifacts/gpu

clean:
	rm -rf $(VENV) artifacts .pytest_cache
