"""Seed the periodic jobs into django-celery-beat's tables, where admins can edit them. Existing rows
with these names are left alone, so an admin's changes survive every later migrate."""

import json

from django.db import migrations

JOBS = [
    # (name, task, every N seconds) — interval jobs
    ("ctxweb: reclaim stuck compactions", "sessions_app.tasks.requeue_stale_compactions", 60),
    ("ctxweb: expire revert backups", "sessions_app.tasks.expire_compaction_backups", 3600),
]
DAILY = ("ctxweb: prune inactive sessions and context documents", "sessions_app.tasks.prune", "30", "3")


def seed(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for name, task, seconds in JOBS:
        if PeriodicTask.objects.filter(name=name).exists():
            continue
        every, _ = IntervalSchedule.objects.get_or_create(every=seconds, period="seconds")
        PeriodicTask.objects.create(name=name, task=task, interval=every, args=json.dumps([]))
    name, task, minute, hour = DAILY
    if not PeriodicTask.objects.filter(name=name).exists():
        crontab, _ = CrontabSchedule.objects.get_or_create(
            minute=minute, hour=hour, day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
        )
        PeriodicTask.objects.create(name=name, task=task, crontab=crontab, args=json.dumps([]))


def unseed(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name__in=[j[0] for j in JOBS] + [DAILY[0]]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0004_archive_entry"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(seed, unseed)]
