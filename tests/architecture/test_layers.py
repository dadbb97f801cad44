"""sessions_app imports one way (docs/ARCHITECTURE.md): interface → tasks → services → selectors →
models → bindings → the engine, and has no import cycle, function-level imports included."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.architecture.layers import SESSIONS_APP_LAYERS, cycles, imports, layer_of, modules, violations

ROOT = Path(__file__).resolve().parents[2]


def test_sessions_app_imports_only_downwards():
    assert violations(ROOT, "sessions_app", SESSIONS_APP_LAYERS) == []


def test_sessions_app_has_no_import_cycle():
    assert cycles(ROOT, "sessions_app") == []


def test_every_module_of_sessions_app_is_in_a_layer_and_was_read():
    names = modules(ROOT, "sessions_app")
    assert {"sessions_app.services.ingest", "sessions_app.tasks", "sessions_app.web.views"} <= set(names)
    assert [n for n in names if layer_of(n, SESSIONS_APP_LAYERS) is None] == []
    # Imports resolve to the module they load, whichever form they take.
    seen = {(i.importer, i.imported) for i in imports(ROOT, "sessions_app")}
    assert {
        ("sessions_app.tasks", "sessions_app.services.auto_compaction"),  # from sessions_app.services import auto
        ("sessions_app.api.views", "sessions_app.models"),  # from sessions_app.models import ...
    } <= seen


# ----------------------------------------------------------------------------- the checker itself

FAKE_LAYERS = (
    ("interface", ("app.api",)),
    ("tasks", ("app.tasks",)),
    ("services", ("app.services",)),
    ("models", ("app.models",)),
)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in {"app/__init__.py": "", "app/services/__init__.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


GOOD = {
    "app/api.py": "from app.services import ingest\nfrom app import tasks\n",
    "app/tasks.py": "from app.services.ingest import append\n",
    "app/services/ingest.py": "from app.models import Message\nfrom . import runs\n",
    "app/services/runs.py": "from ..models import Compaction\n",
    "app/models.py": "import json\n",
}


def test_a_tree_that_imports_downwards_passes(tmp_path):
    root = _tree(tmp_path, GOOD)
    assert violations(root, "app", FAKE_LAYERS) == []
    assert cycles(root, "app") == []


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        ("app/services/runs.py", "from app.tasks import run\n", "services must not import tasks"),
        ("app/models.py", "def f():\n    from app.services import ingest\n", "models must not import services"),
        ("app/services/runs.py", "from .. import api\n", "services must not import interface"),
        ("app/tasks.py", "import app.api\n", "tasks must not import interface"),
    ],
)
def test_an_import_against_the_order_fails(tmp_path, module, line, expected):
    root = _tree(tmp_path, {**GOOD, module: GOOD.get(module, "") + line})
    found = violations(root, "app", FAKE_LAYERS)
    assert len(found) == 1 and expected in found[0], found


def test_a_cycle_fails_even_within_a_layer_and_behind_a_function(tmp_path):
    late = "def run():\n    from app.services import ingest  # hidden in a function: still a cycle\n"
    root = _tree(tmp_path, {**GOOD, "app/services/runs.py": GOOD["app/services/runs.py"] + late})
    assert violations(root, "app", FAKE_LAYERS) == []  # same layer: allowed
    assert cycles(root, "app") == [["app.services.ingest", "app.services.runs"]]


def test_a_module_outside_every_layer_is_reported(tmp_path):
    root = _tree(tmp_path, {**GOOD, "app/stray.py": "from app.models import Message\n"})
    assert violations(root, "app", FAKE_LAYERS) == ["app.stray is in no layer"]


def test_every_folder_of_code_is_a_package_the_installer_finds():
    """setuptools' find_packages skips a folder without ``__init__.py``: ``pip install .`` (the
    Dockerfile) would leave it out although the editable install of a checkout still imports it."""
    for top in ("sessions_app", "compaction", "ctxclient", "ctxweb"):
        folders = {path.parent for path in (ROOT / top).rglob("*.py") if "__pycache__" not in path.parts}
        assert [str(f.relative_to(ROOT)) for f in sorted(folders) if not (f / "__init__.py").exists()] == []
