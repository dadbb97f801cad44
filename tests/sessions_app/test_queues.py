"""Celery queues by kind of work, and workers that keep their database connection between tasks."""

from __future__ import annotations

import pytest
from celery.signals import task_postrun, task_prerun
from django.db import connection

from ctxweb.celery import app, route_by_kind
from sessions_app import tasks

KINDS = {
    tasks.count_exact_tokens: "counting",
    tasks.run_compaction: "compaction",
    tasks.requeue_stale_compactions: "maintenance",
    tasks.expire_compaction_backups: "maintenance",
    tasks.prune: "maintenance",
    tasks.relevel_sessions: "maintenance",
    tasks.send_due_webhooks: "maintenance",
    tasks.deliver_webhook: "maintenance",
}


def test_every_task_goes_to_the_queue_of_its_kind(settings):
    settings.CTX_QUEUE_PREFIX = "site-a-"
    registered = {name for name in app.tasks if name.startswith("sessions_app.")}
    assert registered == {task.name for task in KINDS}  # a new task must be given a kind here
    for task, kind in KINDS.items():
        assert route_by_kind(task.name) == {"queue": f"site-a-{kind}"}
        # Celery's own router, as apply_async uses it, agrees (and an explicit queue still wins).
        assert app.amqp.router.route({}, task.name)["queue"].name == f"site-a-{kind}"
        assert app.amqp.router.route({"queue": "elsewhere"}, task.name)["queue"].name == "elsewhere"


def test_a_worker_without_q_serves_the_three_queues(settings):
    names = {queue.name for queue in app.conf.task_queues}
    assert names == set(settings.CTX_QUEUES.values())
    assert {name.removeprefix(settings.CTX_QUEUE_PREFIX) for name in names} == {"counting", "compaction", "maintenance"}
    assert app.conf.task_default_queue == settings.CTX_QUEUES["maintenance"]


class _Request:
    def __init__(self, eager: bool) -> None:
        self.is_eager = eager


class _Task:
    def __init__(self, eager: bool) -> None:
        self.request = _Request(eager)


@pytest.mark.postgres  # an in-memory SQLite connection is never closed
@pytest.mark.django_db(transaction=True)
def test_a_worker_keeps_its_connection_between_tasks_and_drops_an_old_one(settings):
    assert app.conf.db_reuse_max >= 2**31 - 1  # Celery's fixup would otherwise close it around every task
    connection.ensure_connection()
    before = connection.connection
    for signal in (task_prerun, task_postrun):
        signal.send(sender=None, task=_Task(eager=False), task_id="t")
    assert connection.connection is before  # kept, as a web request keeps it under CONN_MAX_AGE

    connection.close_at = 0  # older than CONN_MAX_AGE: dropped at the next task's start, as after a request
    task_prerun.send(sender=None, task=_Task(eager=False), task_id="t")
    assert connection.connection is None


@pytest.mark.django_db(transaction=True)
def test_a_task_run_in_process_leaves_its_callers_connection_alone():
    connection.ensure_connection()
    before = connection.connection
    connection.close_at = 0
    task_prerun.send(sender=None, task=_Task(eager=True), task_id="t")
    assert connection.connection is before
