# ctxweb — `make run` and `make test` work on a fresh clone with nothing but Python 3.11.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: venv run serve test test-fast lint typecheck worker beat migrate demo bench clients clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11 is needed ($(PYTHON) not found); set PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

migrate: venv
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py ctx demo

run: demo
	@echo ""
	@echo "  ctxweb is starting on http://$(HOST):$(PORT)/"
	@echo "  Sign in as demo / demo  (API docs: http://$(HOST):$(PORT)/api/docs/)"
	@echo "  Django admin: http://$(HOST):$(PORT)/admin/  (demo / demo here, with no DATABASE_URL;"
	@echo "  with one, an admin account from: $(BIN)/python manage.py createsuperuser)"
	@echo ""
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py runserver $(HOST):$(PORT)

# The suite, spread over the machine's cores (pytest-xdist: a test database and a Redis database per worker).
# Without DATABASE_URL / REDIS_URL it runs embedded (SQLite, in-process tasks); tests that need the services skip.
test: venv
	$(BIN)/python -m pytest -n auto --dist worksteal $(PYTEST_ARGS)

# The loop at a desk: no test marked slow, Hypothesis' dev profile (the default outside CI).
test-fast: venv
	$(BIN)/python -m pytest -n auto --dist worksteal -m "not slow" $(PYTEST_ARGS)

lint: typecheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/vulture

# The whole tree, from the root. pyproject.toml [tool.mypy]: strict for the engine, the client and the hook;
# the baseline for the Django side, bench/ and tests/ (a test's own unannotated body is not checked).
typecheck: venv
	$(BIN)/mypy .

# The real agent CLIs the suite drives through the proxy (tests/clients), at the versions package-lock.json pins.
# `npm install --no-save`, not `npm ci`: the lock lacks opencode's binaries for other platforms (the registry
# here answers 404 for some), which `npm ci` refuses; install reads the lock and leaves it as it is.
clients:
	npm install --prefix tests/clients --no-save --no-audit --no-fund

worker: venv
	$(BIN)/celery -A ctxweb worker --loglevel=INFO

beat: venv
	$(BIN)/celery -A ctxweb beat --loglevel=INFO

bench: venv
	$(BIN)/python bench/ingest.py

clean:
	rm -rf $(VENV) db.sqlite3 staticfiles test-artifacts .pytest_cache .mypy_cache
