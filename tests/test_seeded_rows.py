import pytest
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

from sessions_app.models import ModelProfile
from tests.seeded_rows import restore_seeded_rows


@pytest.mark.django_db(transaction=True)
def test_what_migrations_seeded_is_back_after_a_flush():
    profiles = sorted(ModelProfile.objects.values_list("name", "context_window"))
    tasks = sorted(PeriodicTask.objects.values_list("name", "task"))
    assert profiles and tasks  # what the migrations wrote, before any flush
    restore_seeded_rows()  # after a test that flushed nothing (a live server without a database of its own)
    assert sorted(ModelProfile.objects.values_list("name", "context_window")) == profiles
    # What a transactional test's teardown does; with its sequences reset, the hardest case for what follows.
    call_command("flush", verbosity=0, interactive=False, reset_sequences=True)
    assert not ModelProfile.objects.exists()
    restore_seeded_rows()
    assert sorted(ModelProfile.objects.values_list("name", "context_window")) == profiles
    assert sorted(PeriodicTask.objects.values_list("name", "task")) == tasks
    ModelProfile.objects.create(name="after-the-restore", provider="anthropic", context_window=1, max_output_tokens=1)
