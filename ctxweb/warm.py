"""What a long-lived process (a gunicorn worker, a Celery worker) loads before its first request or
task, so that work doesn't wait for it: the URL configuration with every view module it imports (the
anthropic SDK among them), the tasks, the offline tokenizer's encoding and the model price package's
data (~1.5 s of CPU together). Then what is loaded by now (~200,000 objects), which lives as long as
the process, is moved out of the collector's sight: a full collection takes ~7 ms instead of ~125 ms,
which fell on whichever request or task was running."""

from __future__ import annotations

import gc


def warm_up() -> None:
    from django.urls import get_resolver

    import sessions_app.tasks  # noqa: F401  (what a worker's first task would import)
    from compaction.model_catalog import spec_for
    from sessions_app.engine import offline_tokenizer

    get_resolver().url_patterns  # noqa: B018 (the property imports the views)
    offline_tokenizer().count_text("warm up")
    spec_for("claude-sonnet-4-5")  # loads the price package's snapshot
    gc.freeze()
