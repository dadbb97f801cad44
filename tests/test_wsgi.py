"""The WSGI entry point gunicorn loads."""

from __future__ import annotations

import subprocess
import sys


def test_what_the_entry_point_loads_is_kept_out_of_the_collectors_full_passes():
    # A fresh interpreter: the test process has loaded (and maybe frozen) more than gunicorn's worker.
    code = "import gc; import ctxweb.wsgi; print(gc.get_freeze_count())"
    frozen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(frozen.stdout.split()[-1]) > 50_000
