# FRED -- every target creates .venv on first use.
#   make run           the main job: set up, emit Verilog, characterize the switch, print estimates
#   make test          every test that CI runs (the README states its measured time)
#   make regress       make test and every regress-GROUP target below (the README states their times)
#   make regress-GROUP one group of the regression matrix and long soaks (tests/conftest.py), GROUP
#                      cells, adders, fabric, wide, switch, links, characterize, model, synth or formal
#   make coverage      cell, fabric and switch benches with functional coverage; fails on an empty bin
#   make formal        formal proofs (SymbiYosys, Yices): every property x design, as a table
#   make bench [NAME]  benchmarks (timings and ratios, not pass/fail tests); NAME: one of them
#   make verilog       Verilog for the cells, the wafer's fabric chiplets and the switch into build/verilog
#   make characterize  measure the RTL in simulation and write build/fred-timing.json
#   make clean         remove build products (keeps .venv); make distclean removes .venv too

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
FRED   := $(VENV)/bin/fred
STAMP  := $(VENV)/.installed
JOBS   ?= 2
BUILD  := build
#: the groups of make regress (tests/conftest.py REGRESS_GROUPS)
REGRESS_GROUPS := cells adders fabric wide switch links characterize model synth formal
#: pytest's options of make regress-GROUP
REGRESS_PYTEST = FRED_REGRESS=1 $(PY) -m pytest -n $(JOBS) --dist worksteal

.PHONY: all run test regress $(addprefix regress-,$(REGRESS_GROUPS)) coverage formal bench verilog characterize venv clean distclean

all: run

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "[setup] installing fred and its pinned dependencies into $(VENV)"
	@# -qq: errors only (this machine's pip configuration may add index warnings); PYTHONWARNINGS:
	@# setuptools' note that an editable install uses a meta path finder is information, not a problem
	@PYTHONWARNINGS=ignore $(PY) -m pip install -qq --upgrade "pip>=23" "setuptools>=64" wheel
	@PYTHONWARNINGS=ignore $(PY) -m pip install -qq -e .
	@touch $@

venv: $(STAMP)

verilog: $(STAMP)
	@mkdir -p $(BUILD)/verilog
	$(FRED) verilog r  --middle 3 --lanes 4 --dtype fp16 -o $(BUILD)/verilog/fred_r.v
	$(FRED) verilog d  --middle 3 --lanes 4 --dtype fp16 -o $(BUILD)/verilog/fred_d.v
	$(FRED) verilog rd --lanes 4 --dtype fp16 -o $(BUILD)/verilog/fred_rd.v
	$(FRED) verilog fabric --ports 12 --middle 3 --lanes 4 --dtype fp16 -o $(BUILD)/verilog/fred3_p12.v
	$(FRED) verilog fabric --ports 10 --middle 3 --lanes 4 --dtype fp16 -o $(BUILD)/verilog/fred3_p10.v
	$(FRED) verilog switch --ports 12 --middle 3 -o $(BUILD)/verilog/fred_switch_p12.v

characterize: $(STAMP)
	$(FRED) characterize -o $(BUILD)/fred-timing.json

run: $(STAMP)
	@$(PY) -m fred.run

test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist worksteal -m "not regress" tests

regress: test $(addprefix regress-,$(REGRESS_GROUPS))

define REGRESS_RULE
regress-$(1): $$(STAMP)
	$$(REGRESS_PYTEST) -m "regress and group_$(1)" tests

endef
$(foreach g,$(REGRESS_GROUPS),$(eval $(call REGRESS_RULE,$(g))))

coverage: $(STAMP)
	$(PY) -m fred.sim.coverage --out $(BUILD)/coverage

formal: $(STAMP)
	$(PY) -m fred.sim.formal.suite --out $(BUILD)/formal --jobs $(JOBS)

# make bench NAME ...: the goals after bench are benchmark names (python -m fred.bench NAME ...),
# not targets of their own
ifeq (bench,$(firstword $(MAKECMDGOALS)))
BENCH_NAMES := $(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS))
$(eval $(BENCH_NAMES):;@:)
endif

bench: $(STAMP)
	$(PY) -m fred.bench $(BENCH_NAMES)

clean:
	rm -rf $(BUILD) .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
