"""The WSGI entry point gunicorn loads, and a Celery worker's start: each warmed up before its first request or task."""

from __future__ import annotations

import subprocess
import sys


def test_what_the_entry_point_loads_is_kept_out_of_the_collectors_full_passes():
    # A fresh interpreter: the test process has loaded (and maybe frozen) more than gunicorn's worker.
    code = "import gc; import ctxweb.wsgi; print(gc.get_freeze_count())"
    frozen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(frozen.stdout.split()[-1]) > 50_000


def test_a_celery_worker_loads_the_tokenizer_and_freezes_before_its_first_task():
    code = (
        "import gc; import ctxweb.celery; from celery.signals import worker_init;"
        "from sessions_app.engine import offline_tokenizer;"
        "print(offline_tokenizer.cache_info().currsize, gc.get_freeze_count());"
        "worker_init.send(sender=None);"
        "print(offline_tokenizer.cache_info().currsize, gc.get_freeze_count())"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = (tuple(int(n) for n in line.split()) for line in ran.stdout.split("\n")[-3:-1])
    assert before == (0, 0)
    assert after[0] == 1 and after[1] > 50_000
