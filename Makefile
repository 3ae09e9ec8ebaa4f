# halo-cluster: every target creates or reuses the virtualenv itself.
VENV   ?= .venv
PY     := $(VENV)/bin/python
# the tool's own entry point: its exit codes are the tool's (make turns any failure into 2)
CLI    := $(VENV)/bin/halo-cluster
NODES  ?= 2
LINK   ?= roce
FEDORA ?=
NODE   ?= node1
CLUSTER_CONFIG ?= cluster.yml
LAB_CONFIG := .lab/cluster.yml
SERVE  ?=
DEMO_CONFIG := $(if $(SERVE),.lab/cluster-serve.yml,$(LAB_CONFIG))

.PHONY: venv test unit lint demo lab-up lab-down lab-status lab-reboot deploy verify drift status bench

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py constraints.txt
	@python3 -m venv $(VENV) 2>/dev/null || { apt-get update -q && apt-get install -y -q python3-venv && python3 -m venv $(VENV); }
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[dev,test]'
	touch $@

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

unit: venv
	$(PY) -m pytest tests/unit tests/plan

# the unit and plan tests run beside the e2e ones (tests/suite.py); one report, reports/junit.xml
test: lint
	$(PY) -m tests.suite reports/junit.xml

lab-up: venv
	$(PY) -m lab up --nodes $(NODES) --link $(LINK) $(if $(FEDORA),--fedora $(FEDORA))

lab-down: venv
	$(PY) -m lab down

lab-status: venv
	$(PY) -m lab status

lab-reboot: venv
	$(PY) -m lab reboot $(NODE)

demo: lab-up
	$(if $(SERVE),cat $(LAB_CONFIG) lab/serve.yml > $(DEMO_CONFIG))
	$(CLI) deploy --config $(DEMO_CONFIG) -y --data halo_reboot=if-needed
	$(PY) -m lab status
	$(CLI) verify --config $(DEMO_CONFIG)
	$(if $(SERVE),@$(CLI) where --config $(DEMO_CONFIG))

# shortcuts for `halo-cluster COMMAND`; in CI call $(CLI) itself (docs/ci.md)
verify: venv
	$(CLI) verify --config $(CLUSTER_CONFIG)

drift: venv
	$(CLI) drift --config $(CLUSTER_CONFIG)

status: venv
	$(CLI) status --config $(CLUSTER_CONFIG)

deploy: venv
	$(CLI) deploy --config $(CLUSTER_CONFIG)
