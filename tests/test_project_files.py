"""The project's own files say what the docs promise."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_compose_runs_the_whole_stack_with_the_same_env():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ANTHROPIC_API_KEY"} <= set(env), name
        assert env["DATABASE_URL"].startswith("postgres://") and env["REDIS_URL"].startswith("redis://")
        assert "healthcheck" in services[name]
    assert "gunicorn" in services["web"]["command"]
    assert "worker" in services["worker"]["command"] and "beat" in services["beat"]["command"]
    for name in ("postgres", "redis"):
        assert "healthcheck" in services[name]


def test_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    first_block = text.split("```", 2)[1]
    commands = [line.strip() for line in first_block.splitlines()[1:] if line.strip()]
    assert commands == ["make run", "make test"]


def test_dependencies_are_pinned():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    assert deps and all("==" in d for d in deps), [d for d in deps if "==" not in d]


def test_deploy_check_is_clean_with_production_settings(tmp_path):
    import secrets
    import subprocess
    import sys

    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "DJANGO_SETTINGS_MODULE")
    }
    env.update(
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(50),
        CTX_HTTPS="1",
        ALLOWED_HOSTS="ctx.example.com",
        CTX_MANIFEST_STATIC="1",
        DATABASE_URL=f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_models_need_no_new_migration(tmp_path):
    """Some choices come from the engine (compaction.types.level_choices): they must stay what the migrations hold."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'migrations.sqlite3'}"
    result = subprocess.run(
        [sys.executable, "manage.py", "makemigrations", "--check", "--dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
