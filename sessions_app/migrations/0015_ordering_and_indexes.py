"""Message and Checkpoint order by the session_id column (ordering by the relation joined AgentSession
into every message query); the single-column indexes of foreign keys that a composite index already
leads with are dropped; Message.compaction gets a partial index holding only messages a compaction
changed.

The indexes are dropped by name rather than by AlterField: on PostgreSQL, AlterField also drops every
other single-column index on the column (the partial unique ``compaction_one_active_per_session``
among them) and drops and re-validates each foreign key, a scan of the whole table."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.migrations.operations.special import SeparateDatabaseAndState

# (model, field): foreign keys whose own index a composite index (or unique constraint) makes redundant.
REDUNDANT = [
    ("agentsession", "project"),
    ("checkpoint", "session"),
    ("compaction", "session"),
    ("ingestrejection", "session"),
    ("membership", "project"),
    ("message", "compaction"),
    ("message", "session"),
    ("messagebackup", "compaction"),
    ("tooluse", "session"),
    ("webhookdelivery", "webhook"),
]


def _index_name(schema_editor, model, field_name):
    field = model._meta.get_field(field_name)
    return schema_editor._create_index_name(model._meta.db_table, [field.column], suffix="")


def drop_indexes(apps, schema_editor):
    for model_name, field_name in REDUNDANT:
        model = apps.get_model("sessions_app", model_name)
        schema_editor.execute(
            f"DROP INDEX IF EXISTS {schema_editor.quote_name(_index_name(schema_editor, model, field_name))}"
        )


def create_indexes(apps, schema_editor):
    for model_name, field_name in REDUNDANT:
        model = apps.get_model("sessions_app", model_name)
        column = model._meta.get_field(field_name).column
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {schema_editor.quote_name(_index_name(schema_editor, model, field_name))} "
            f"ON {schema_editor.quote_name(model._meta.db_table)} ({schema_editor.quote_name(column)})"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0014_webhooks"),
    ]

    operations = [
        SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="agentsession",
                    name="project",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sessions",
                        to="sessions_app.project",
                    ),
                ),
                migrations.AlterField(
                    model_name="checkpoint",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="checkpoints",
                        to="sessions_app.agentsession",
                    ),
                ),
                migrations.AlterField(
                    model_name="compaction",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="compactions",
                        to="sessions_app.agentsession",
                    ),
                ),
                migrations.AlterField(
                    model_name="ingestrejection",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rejections",
                        to="sessions_app.agentsession",
                    ),
                ),
                migrations.AlterField(
                    model_name="membership",
                    name="project",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to="sessions_app.project",
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="compaction",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="changed_messages",
                        to="sessions_app.compaction",
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="sessions_app.agentsession",
                    ),
                ),
                migrations.AlterField(
                    model_name="messagebackup",
                    name="compaction",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="backups",
                        to="sessions_app.compaction",
                    ),
                ),
                migrations.AlterField(
                    model_name="tooluse",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tool_uses",
                        to="sessions_app.agentsession",
                    ),
                ),
                migrations.AlterField(
                    model_name="webhookdelivery",
                    name="webhook",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deliveries",
                        to="sessions_app.webhook",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_indexes, create_indexes)],
        ),
        migrations.AlterModelOptions(
            name="checkpoint",
            options={"ordering": ["session_id", "-version"]},
        ),
        migrations.AlterModelOptions(
            name="message",
            options={"ordering": ["session_id", "seq"]},
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("compaction__isnull", False)), fields=["compaction"], name="message_compaction"
            ),
        ),
    ]
