"""Each compaction's project (its session's, set on save from now on), filled with one UPDATE; the
dashboard's indexes over it; the closest-sessions index with ``id`` last (the dashboard's order) and a
partial index of the paused sessions."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Q, Subquery


def fill(apps, schema_editor):
    Compaction = apps.get_model("sessions_app", "Compaction")
    AgentSession = apps.get_model("sessions_app", "AgentSession")
    project = AgentSession.objects.filter(pk=OuterRef("session_id")).values("project_id")[:1]
    Compaction.objects.filter(project__isnull=True).update(project_id=Subquery(project))


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0036_rollup")]

    operations = [
        migrations.AddField(
            model_name="compaction",
            name="project",
            field=models.ForeignKey(
                null=True,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="sessions_app.project",
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="compaction",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="sessions_app.project",
            ),
        ),
        migrations.RemoveIndex(model_name="agentsession", name="session_project_usage"),
        migrations.AddIndex(
            model_name="agentsession",
            index=models.Index(fields=["project", "status", "-usage_percent", "id"], name="session_project_usage"),
        ),
        migrations.AddIndex(
            model_name="agentsession",
            index=models.Index(
                condition=Q(auto_paused=True, status="active"), fields=["project"], name="session_paused"
            ),
        ),
        migrations.AddIndex(
            model_name="compaction",
            index=models.Index(
                condition=Q(status="failed"), fields=["project", "session"], name="compaction_project_failed"
            ),
        ),
        migrations.AddIndex(
            model_name="compaction",
            index=models.Index(fields=["project", "created_at"], name="compaction_project_created"),
        ),
        migrations.AddIndex(
            model_name="compaction",
            index=models.Index(
                condition=Q(status="succeeded"), fields=["project", "finished_at"], name="compaction_project_saved"
            ),
        ),
    ]
