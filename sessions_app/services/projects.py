"""Projects, their members and roles (a project always keeps an admin), and their compaction policy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction

from compaction.policy import PRESETS, preset
from sessions_app.errors import Conflict, InvalidInput
from sessions_app.models import (
    CompactionPolicy,
    Membership,
    Project,
    Role,
)
from sessions_app.services.agent_sessions import check_text

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

PROJECT_NAME_MAX = 200  # the column


PROJECT_DESCRIPTION_MAX = 10_000  # shown on every project page: a paragraph, not a document


@transaction.atomic
def project_create(*, user: User, name: str, description: str = "") -> Project:
    name = name.strip()
    if not name:
        raise InvalidInput("A project needs a name.", code="invalid_name", field="name")
    check_text(name, "name", limit=PROJECT_NAME_MAX)
    check_text(description, "description", limit=PROJECT_DESCRIPTION_MAX)
    project = Project.objects.create(name=name, description=description, created_by=user)
    Membership.objects.create(project=project, user=user, role=Role.ADMIN)
    policy = CompactionPolicy(project=project)
    preset_name = settings.CTX_DEFAULT_POLICY_PRESET
    policy.apply_engine(preset(preset_name), preset_name=preset_name)
    policy.save()
    return project


@transaction.atomic
def membership_set(*, project: Project, user: User, role: str) -> Membership:
    if role not in Role.values:
        raise InvalidInput(f"Role must be one of {', '.join(Role.values)}.", code="invalid_role", field="role")
    if role != Role.ADMIN:
        _keep_an_admin(project, leaving=user)
    membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    return membership


@transaction.atomic
def membership_remove(*, project: Project, user: User) -> None:
    _keep_an_admin(project, leaving=user)
    Membership.objects.filter(project=project, user=user).delete()


def _keep_an_admin(project: Project, *, leaving: User) -> None:
    """A project always keeps one admin, or nobody could manage it again."""
    admins = Membership.objects.select_for_update().filter(project=project, role=Role.ADMIN)
    if not admins.exclude(user=leaving).exists():
        raise Conflict("A project needs at least one admin; make someone else admin first.", code="last_admin")


def policy_update(*, policy: CompactionPolicy, changes: dict[str, Any]) -> CompactionPolicy:
    """Edited numbers: validated as in Django admin (the model's clean), then marked custom."""
    for name, value in changes.items():
        setattr(policy, name, value)
    policy.preset = "custom"
    policy.full_clean()
    policy.save()
    return policy


def policy_apply_preset(*, policy: CompactionPolicy, preset_name: str) -> CompactionPolicy:
    if preset_name not in PRESETS:
        raise InvalidInput(f"Unknown preset {preset_name!r}; choose one of {', '.join(PRESETS)}.", field="preset")
    keep_auto, keep_model = policy.auto, policy.summarizer_model
    policy.apply_engine(preset(preset_name), preset_name=preset_name)
    policy.auto, policy.summarizer_model = keep_auto, keep_model
    policy.full_clean()
    policy.save()
    return policy
