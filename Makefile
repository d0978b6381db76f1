# The workbook's commands. Everything runs in ./.venv, created on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# pytest-xdist: one worker per core (at most 4); each test file, and each notebook's cells in
# order, on one worker (module fixtures built once; a notebook is one kernel session)
PYTEST := $(PY) -m pytest -n auto --maxprocesses 4 --dist loadfile
# nbval with the default kernel parameters (NNLIB_TUNE=0: no search, the same kernels each run)
NBVAL  := NNLIB_TUNE=0 $(PYTEST) --nbval --nbval-current-env \
          --nbval-sanitize-with notebooks/nbval_sanitize.cfg --nbval-cell-timeout 600

# Tests that touch no kernel (files, packaging, site, benchmarks' plumbing; Oclgrind sets its
# own limits), or that re-run whole notebooks nbval already runs under the profile (the
# exercise hand-out, the nbgrader round): the GPU-profile pass leaves them out.
HOST_TESTS := tests/test_packaging.py tests/test_site.py tests/test_notebooks_sync.py \
              tests/test_notebook_outputs.py tests/test_benchmarks.py tests/test_oclgrind.py \
              tests/test_data.py tests/test_lab.py tests/test_benchmarks_all.py \
              tests/test_browser.py tests/test_fuzz_checkpoint.py tests/test_nbgrader.py \
              tests/test_intel_runtime.py
GPU_DESELECT := tests/test_exercises.py::test_exercise_notebooks_run_and_say_not_yet
# Every kernel against its numpy reference: run again on each other device, where another
# compiler may miscompile what the default one builds right (PyPI's PoCL and 16-lane floats)
KERNEL_TESTS := tests/test_batches.py tests/test_dense.py tests/test_head.py tests/test_complex_conv.py tests/test_conv.py \
                tests/test_fft.py tests/test_optim.py tests/test_fused.py tests/test_attention.py \
                tests/test_softmax.py tests/test_transformer.py

# `make quick`: the core kernels against their numpy references, without nbval and without
# the tests that build every tuning candidate (-k "not every_")
QUICK_TESTS := tests/test_runtime.py tests/test_launcher.py tests/test_dense.py \
               tests/test_softmax.py tests/test_fft.py tests/test_optim.py
# VERBOSE=1: let the notebooks' compiler warnings and benchmark output through to the terminal
RUN_NOTEBOOKS := $(PY) tools/run_notebooks.py $(if $(filter-out 0,$(VERBOSE)),--verbose)
# LAB_OPTS: extra options for JupyterLab, e.g. LAB_OPTS="--no-browser --port 8888 --ip 0.0.0.0"
LAB_OPTS ?=

.PHONY: workbook test quick lab setup setup-test doctor remove-intel unit notebooks gpu-profile \
        other-devices notebook exercises assignments browser trust site clean

## make workbook: set up, then execute every notebook in order into build/workbook/ (one
## line per notebook; the kernels' own output goes to build/workbook/logs/ unless VERBOSE=1)
workbook: setup doctor
	$(RUN_NOTEBOOKS) --out build/workbook

## make test: set up with the test extras, then unit tests and nbval on the default device,
## both again under the GPU profile (NNLIB_PROFILE=gpu: a GPU's limits, so its code paths run),
## then the kernel tests and nbval on every other device that compiles; all against the same
## stored outputs. Its doctor offers Intel's CPU runtime (INTEL=auto: installed into .venv where
## it can be, so that a second compiler runs the tests); `make test INTEL=0` leaves it out
test: INTEL ?= auto
test: setup-test doctor unit notebooks gpu-profile other-devices

## make quick: set up with pytest only (not the test extras: the PyTorch comparisons are
## skipped), then the core kernels' unit tests: a check in minutes that the device computes right
quick: setup doctor
	$(PY) -m pip install -q pytest pytest-xdist
	$(PYTEST) -k "not every_" $(QUICK_TESTS)

## make other-devices: the kernel tests and nbval on every other device that compiles (e.g. a
## second PoCL build, Intel's CPU runtime)

## make lab: open JupyterLab on notebooks/ (jupytext reads notebooks/jupytext.toml); LAB_OPTS
## passes options to it, e.g. make lab LAB_OPTS="--no-browser --port 8888 --ip 0.0.0.0"
lab: setup doctor trust
	$(VENV)/bin/jupyter lab $$([ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_OPTS) notebooks/

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

setup: $(PY)
	$(PY) -m pip install -q -e ".[course]"

setup-test: $(PY)
	$(PY) -m pip install -q -e ".[course,test]"

## make doctor: on Debian/Ubuntu as root, first install Debian's PoCL beside PyPI's (once; a
## second PoCL build, often the faster; POCL=0 skips it, `apt-get remove pocl-opencl-icd`
## undoes it); then check that an OpenCL device compiles kernels, else install Intel's CPU
## runtime for OpenCL into .venv. `make doctor INTEL=1` installs Intel's runtime in any case,
## INTEL=auto where it can be had (`make remove-intel` removes it). Doctor times every CPU
## device and makes the fastest the default
doctor:
	@if [ "$(POCL)" != 0 ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && ! dpkg -s pocl-opencl-icd >/dev/null 2>&1; then \
	  echo "nnlib doctor: installing Debian's PoCL (apt-get install pocl-opencl-icd) to time it beside PyPI's;" \
	       "apt-get remove pocl-opencl-icd removes it, make doctor POCL=0 skips this"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pocl-opencl-icd >/dev/null; } \
	  || echo "nnlib doctor: apt-get failed; going on without Debian's PoCL"; \
	fi
	@$(PY) -m nnlib.doctor $(if $(filter 1,$(INTEL)),--install-intel,$(if $(filter auto,$(INTEL)),--offer-intel)) \
	|| $(PY) -m nnlib.doctor --install-intel

## make remove-intel: uninstall Intel's CPU runtime from .venv and delete its ICD file
remove-intel:
	$(PY) -m nnlib.doctor --remove-intel

unit: browser
	$(PYTEST) tests

notebooks:
	$(NBVAL) notebooks/

gpu-profile:
	NNLIB_PROFILE=gpu $(PYTEST) tests $(HOST_TESTS:%=--ignore=%) --deselect $(GPU_DESELECT)
	NNLIB_PROFILE=gpu $(NBVAL) notebooks/

other-devices:
	@for ctx in $$($(PY) -m nnlib.doctor --others); do \
	  echo "kernel tests and nbval on PYOPENCL_CTX=$$ctx"; \
	  PYOPENCL_CTX=$$ctx $(PYTEST) $(KERNEL_TESTS) || exit 1; \
	  PYOPENCL_CTX=$$ctx $(NBVAL) notebooks/ || exit 1; \
	done

## make notebook NB=notebooks/01_dense_kernels.py: refresh one .ipynb from its .py and execute it
notebook:
	$(VENV)/bin/jupytext --to ipynb --update $(NB)
	$(RUN_NOTEBOOKS) --inplace $(NB:.py=.ipynb)

## make exercises: the notebooks and kernel files without their solutions, in build/exercises/
exercises: setup
	$(PY) tools/make_exercises.py --out build/exercises

## make assignments: an nbgrader course in build/course/ (source/ with the solutions and
## nbgrader metadata, release/ by `nbgrader generate_assignment`); teachers/README.md says how
## to autograde and give feedback
assignments: setup-test
	$(PY) tools/make_exercises.py --nbgrader --out build/course

## make browser: headless Chromium for tests/test_browser.py; on Debian as root, install
## Debian's chromium and chromium-driver when missing (elsewhere the browser test is skipped)
browser:
	@command -v chromedriver >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && echo "installing Debian's chromium and chromium-driver ..." \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	     apt-get install -y -qq chromium chromium-driver >/dev/null; } \
	  || echo "no chromedriver and no root to install it: tests/test_browser.py is skipped"

## make trust: sign the stored outputs (JupyterLab draws widget panels only in trusted notebooks)
trust: setup
	$(VENV)/bin/jupyter trust notebooks/[0-9][0-9]_*.ipynb

## make site: the executed workbook as static HTML in build/site/ (from the stored outputs)
site: setup
	$(PY) tools/build_site.py --out build/site

clean:
	rm -rf build dist
