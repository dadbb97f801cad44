"""Projects, their members and roles (a project always keeps an admin), and their compaction policy."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction

from compaction.policy import PRESETS, preset
from sessions_app.errors import Conflict, InvalidInput
from sessions_app.models import (
    CompactionPolicy,
    Membership,
    Project,
    Role,
)
from sessions_app.services import sealing
from sessions_app.services.agent_sessions import check_text

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

log = logging.getLogger(__name__)

PROJECT_NAME_MAX = 200  # the column
# What applying a preset leaves as it was: the team's choices, not numbers a preset is about.
PRESET_KEEPS = ("auto", "summarizer_provider", "summarizer_model")


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
    policy_ensure(project=project)
    return project


def policy_ensure(*, project: Project) -> CompactionPolicy:
    """The project's policy row, made from the configured default preset when it has none (a
    project added in Django admin)."""
    preset_name = settings.CTX_DEFAULT_POLICY_PRESET
    policy, created = CompactionPolicy.objects.get_or_create(project=project, defaults={"preset": preset_name})
    if created:
        policy.apply_engine(preset(preset_name), preset_name=preset_name)
        policy.save()
    return policy


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


def policy_update(
    *, policy: CompactionPolicy, changes: Mapping[str, Any], preset_name: str | None = None
) -> CompactionPolicy:
    """A policy edited (REST, the settings page, Django admin): ``preset_name``'s numbers first, when
    given (keeping ``auto`` and the summarizer, as ``policy_apply_preset``), then ``changes`` on
    top; validated as a whole by the model's clean (``compaction.policy.validate``) before anything is
    written, and labelled with the preset its numbers equal, else "custom". A refusal is an
    ``InvalidInput`` naming every field at fault, and leaves ``policy`` as it was."""
    unknown = sorted(set(changes) - set(CompactionPolicy.ENGINE_FIELDS))
    if unknown:
        raise InvalidInput(
            f"{unknown[0]}: not a policy field.",
            code="unknown_field",
            field=unknown[0],
            errors={name: ["Not a policy field."] for name in unknown},
        )
    if preset_name is not None and preset_name not in PRESETS:
        raise InvalidInput(
            f"Unknown preset {preset_name!r}; choose one of {', '.join(PRESETS)}.",
            code="invalid_preset",
            field="preset",
        )
    try:
        with transaction.atomic():
            if policy.pk is not None:
                # Each edit starts from the row as committed: concurrent edits of different fields both hold.
                policy.refresh_from_db(from_queryset=CompactionPolicy.objects.select_for_update())
            if preset_name is not None:
                kept = {name: getattr(policy, name) for name in PRESET_KEEPS}
                policy.apply_engine(preset(preset_name), preset_name=preset_name)
                for name, value in kept.items():
                    setattr(policy, name, value)
            for name, value in changes.items():
                setattr(policy, name, value)
            policy.preset = preset_label(policy)
            policy.full_clean()
            policy.save()
    except ValidationError as exc:
        if policy.pk is not None:
            policy.refresh_from_db()
        raise _refusal(exc) from None
    return policy


def policy_apply_preset(*, policy: CompactionPolicy, preset_name: str) -> CompactionPolicy:
    return policy_update(policy=policy, changes={}, preset_name=preset_name)


def preset_label(policy: CompactionPolicy) -> str:
    """The preset whose numbers the policy has (``PRESET_KEEPS`` aside: applying a preset keeps
    them): its current label when that one still fits, else the first that does, else "custom"."""
    values = policy.to_engine()

    def fits(name: str) -> bool:
        named = PRESETS[name]
        return replace(values, **{name: getattr(named, name) for name in PRESET_KEEPS}) == named

    if policy.preset in PRESETS and fits(policy.preset):
        return policy.preset
    return next((name for name in PRESETS if fits(name)), "custom")


def _refusal(exc: ValidationError) -> InvalidInput:
    errors = {name: [str(m) for m in messages] for name, messages in exc.message_dict.items()}
    first = next(iter(errors))
    where = None if first == NON_FIELD_ERRORS else first
    detail = f"{where}: {errors[first][0]}" if where else errors[first][0]
    return InvalidInput(detail, code="invalid_policy", field=where, errors=errors)


_UPSTREAM_KEY = re.compile(r"[\x21-\x7e]{8,500}")  # one header value: printable ASCII, no spaces or line breaks


# Where each provider's key of a project is kept: (sealed key, hint) columns.
_KEY_FIELDS = {
    "anthropic": ("upstream_api_key", "upstream_api_key_hint"),
    "openai": ("openai_api_key", "openai_api_key_hint"),
}


def project_upstream_key_set(*, project: Project, api_key: str) -> Project:
    """The Anthropic API key the project's proxy requests go upstream with when the caller sends none
    (its admins set it; the caller checks the role), and its summaries by an Anthropic model."""
    return project_provider_key_set(project=project, provider="anthropic", api_key=api_key)


def project_upstream_key(project: Project) -> str | None:
    """The Anthropic API key the project's admins set for requests that come without one, or None."""
    return project_provider_key(project, "anthropic")


def project_provider_key_set(*, project: Project, provider: str, api_key: str) -> Project:
    """The project's own API key for ``provider`` (``anthropic``, ``openai``). Sealed, never written
    to a log, shown only by its last characters; "" removes it."""
    api_key = api_key.strip()
    if api_key and not _UPSTREAM_KEY.fullmatch(api_key):
        raise InvalidInput(
            "An API key is 8 to 500 printable characters, without spaces.", code="invalid_api_key", field="api_key"
        )
    sealed, hint = _KEY_FIELDS[provider]
    setattr(project, sealed, sealing.seal(api_key) if api_key else "")
    setattr(project, hint, f"…{api_key[-4:]}" if api_key else "")
    project.save(update_fields=[sealed, hint])
    return project


def project_provider_key(project: Project, provider: str) -> str | None:
    """The project's own API key for ``provider``, or None (none set, or no longer readable)."""
    fields = _KEY_FIELDS.get(provider)
    sealed = getattr(project, fields[0]) if fields else ""
    if not sealed:
        return None
    key = sealing.unseal(sealed)
    if key is None:
        log.warning("project %s: its %s API key can't be opened (the encryption keys changed)", project.pk, provider)
    return key
