"""Every preset now protects no tool output by tokens (the newest turns do; issue 14). Policies that
follow a preset and still hold the old default of 40,000 follow it there; a custom policy keeps its
number."""

from django.db import migrations, models

OLD_DEFAULT = 40_000
PRESET_NAMES = ("default", "adk", "kai", "gsd", "brainchain")


def follow_the_presets(apps, schema_editor):
    CompactionPolicy = apps.get_model("sessions_app", "CompactionPolicy")
    CompactionPolicy.objects.filter(preset__in=PRESET_NAMES, protect_tool_tokens=OLD_DEFAULT).update(
        protect_tool_tokens=0
    )


def back_to_the_old_default(apps, schema_editor):
    CompactionPolicy = apps.get_model("sessions_app", "CompactionPolicy")
    CompactionPolicy.objects.filter(preset__in=PRESET_NAMES, protect_tool_tokens=0).update(
        protect_tool_tokens=OLD_DEFAULT
    )


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0010_session_exact_cached"),
    ]

    operations = [
        migrations.AlterField(
            model_name="compactionpolicy",
            name="protect_tool_tokens",
            field=models.PositiveIntegerField(
                default=0, help_text="The newest tokens of tool output no strategy clears (OpenCode protects 40,000)."
            ),
        ),
        migrations.RunPython(follow_the_presets, back_to_the_old_default),
    ]
