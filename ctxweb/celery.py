import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")

app = Celery("ctxweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Which queue each task goes to (settings.CTX_QUEUES); everything else is maintenance.
TASK_KINDS = {
    "sessions_app.tasks.count_exact_tokens": "counting",
    "sessions_app.tasks.run_compaction": "compaction",
}


def route_by_kind(name: str, *_: Any, **__: Any) -> dict[str, str]:
    """The task router (settings.CELERY_TASK_ROUTES). It reads the prefix when a task is sent, so a
    process can be pointed at other queues (the tests' workers) without rebuilding Celery's router."""
    from django.conf import settings

    return {"queue": settings.CTX_QUEUE_PREFIX + TASK_KINDS.get(name, "maintenance")}


@worker_init.connect
def _warm_up(**_: Any) -> None:
    """A worker loads what its first task would (``ctxweb.warm``) before it takes one; under prefork,
    before its children fork, so they share it."""
    import django
    from django.apps import apps

    from ctxweb.warm import warm_up

    if not apps.ready:
        django.setup()
    warm_up()


@task_prerun.connect
@task_postrun.connect
def _database_connections_as_in_a_request(task: Any = None, **_: Any) -> None:
    """What Django does around each web request: drop a connection that is broken or older than
    CONN_MAX_AGE, keep the rest (settings.CELERY_DB_REUSE_MAX keeps Celery from closing them all).
    Not for a task run in-process (embedded mode): it runs inside its caller's request."""
    from django.db import close_old_connections

    if task is None or getattr(task.request, "is_eager", False):
        return
    close_old_connections()


@task_postrun.connect
def _metrics_sent(**_: Any) -> None:
    """A pool process can end with ``os._exit`` (no ``atexit``): what its task recorded goes now."""
    from sessions_app import metrics

    metrics.flush()
