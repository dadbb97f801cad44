from django.db import migrations


def set_claude_calibration(apps, schema_editor):
    # Profiles still at the untuned 1.0 with no exact-count samples take the factor measured on real
    # Claude Code transcripts (docs/TOKEN_COUNTING.md); tuned or learned factors are left alone.
    from compaction.model_catalog import CLAUDE_CALIBRATION

    ModelProfile = apps.get_model("sessions_app", "ModelProfile")
    ModelProfile.objects.filter(provider="anthropic", calibration_factor=1.0, calibration_samples=0).update(
        calibration_factor=CLAUDE_CALIBRATION
    )


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0002_seed_model_profiles")]
    operations = [migrations.RunPython(set_claude_calibration, migrations.RunPython.noop)]
