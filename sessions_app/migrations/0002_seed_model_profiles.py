from django.db import migrations


def seed(apps, schema_editor):
    # The engine's table of known models is the starting point; rows already present are kept
    # (an admin may have tuned them).
    from compaction.model_catalog import KNOWN_MODELS

    ModelProfile = apps.get_model("sessions_app", "ModelProfile")
    for spec in KNOWN_MODELS:
        ModelProfile.objects.get_or_create(
            name=spec.name,
            defaults={
                "provider": spec.provider,
                "context_window": spec.context_window,
                "max_output_tokens": spec.max_output_tokens,
                "calibration_factor": spec.calibration,
            },
        )


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
