import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_engine_imports_without_django_or_celery():
    code = (
        "import pkgutil, importlib, sys, compaction\n"
        "for m in pkgutil.iter_modules(compaction.__path__):\n"
        "    importlib.import_module('compaction.' + m.name)\n"
        "banned = ('django', 'celery', 'rest_framework', 'sessions_app')\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in banned)\n"
        "print(','.join(bad))\n"
        "print(len([m for m in pkgutil.iter_modules(compaction.__path__)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded, modules = out.stdout.split("\n")[:2]
    assert loaded == ""
    assert int(modules) >= 8  # every engine module was imported
