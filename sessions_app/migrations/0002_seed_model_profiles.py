from django.db import migrations


# The engine's table of known models when this was written (name, provider, context window, max
# output tokens); 0026 reads it to tell the rows seeded from it from the rows admins changed.
SEEDED = (
    ("claude-opus-4-5", "anthropic", 200_000, 64_000),
    ("claude-sonnet-4-5", "anthropic", 200_000, 64_000),
    ("claude-haiku-4-5", "anthropic", 200_000, 64_000),
    ("claude-opus-4-1", "anthropic", 200_000, 32_000),
    ("claude-opus-4", "anthropic", 200_000, 32_000),
    ("claude-sonnet-4", "anthropic", 200_000, 64_000),
    ("claude-3-7-sonnet", "anthropic", 200_000, 64_000),
    ("claude-3-5-sonnet", "anthropic", 200_000, 8_192),
    ("claude-3-5-haiku", "anthropic", 200_000, 8_192),
    ("claude-3-opus", "anthropic", 200_000, 4_096),
    ("claude-3-haiku", "anthropic", 200_000, 4_096),
    ("gpt-4o", "openai", 128_000, 16_384),
    ("gpt-4o-mini", "openai", 128_000, 16_384),
    ("gpt-4.1", "openai", 1_047_576, 32_768),
    ("gpt-4.1-mini", "openai", 1_047_576, 32_768),
    ("gpt-4-turbo", "openai", 128_000, 4_096),
    ("gpt-4", "openai", 8_192, 8_192),
    ("gpt-5", "openai", 400_000, 128_000),
    ("gpt-5-mini", "openai", 400_000, 128_000),
    ("o3", "openai", 200_000, 100_000),
    ("o4-mini", "openai", 200_000, 100_000),
)


def seed(apps, schema_editor):
    # Rows already present are kept (an admin may have tuned them).
    ModelProfile = apps.get_model("sessions_app", "ModelProfile")
    for name, provider, window, max_output in SEEDED:
        ModelProfile.objects.get_or_create(
            name=name,
            defaults={
                "provider": provider,
                "context_window": window,
                "max_output_tokens": max_output,
                "calibration_factor": 1.0,
            },
        )


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
