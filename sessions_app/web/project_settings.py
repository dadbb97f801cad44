"""Project settings (project admins): members and roles, the compaction policy; and every user's own
API keys. Each form posts to its own view, which calls one service."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from sessions_app import tasks
from sessions_app.errors import ServiceError
from sessions_app.models import Project, Role, Webhook
from sessions_app.selectors import access, usage
from sessions_app.services import keys as key_services
from sessions_app.services import projects, summarizers
from sessions_app.web.access import AuthenticatedHttpRequest, apikey_for, member_for, project_for
from sessions_app.web.forms import (
    ApiKeyForm,
    MemberForm,
    OpenAIKeyForm,
    PolicyForm,
    PresetForm,
    RoleForm,
    UpstreamKeyForm,
)


def _settings_url(project: Project, anchor: str = "") -> str:
    return reverse("web:project-settings", args=[project.pk]) + anchor


def render_settings(
    request: AuthenticatedHttpRequest, project: Project, *, status: int = 200, **forms: Any
) -> HttpResponse:
    memberships = access.memberships_of(project)
    policy = usage.project_policy(project)
    context = {
        "project": project,
        "members": [(m, RoleForm(initial={"role": m.role}, prefix=f"m{m.user_id}")) for m in memberships],
        "member_form": forms.get("member_form") or MemberForm(),
        "preset_form": forms.get("preset_form") or PresetForm(initial={"preset": policy.preset}),
        "policy_form": forms.get("policy_form") or PolicyForm(instance=policy),
        "key_form": forms.get("key_form") or ApiKeyForm(),
        "keys": access.apikey_list_for(request.user),
        "new_key": forms.get("new_key"),
        "webhook_count": Webhook.objects.filter(project=project).count(),
        "upstream_key_form": forms.get("upstream_key_form") or UpstreamKeyForm(),
        "openai_key_form": forms.get("openai_key_form") or OpenAIKeyForm(),
        "summarizer_policy": policy,
        "summarizer_key": summarizers.summarizer_key_source(project, policy.to_engine()),
    }
    return render(request, "sessions_app/project_settings.html", context, status=status)


@login_required
def project_settings(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    return render_settings(request, project_for(request, project_id, min_role=Role.ADMIN))


@login_required
@require_POST
def member_add(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_for(request, project_id, min_role=Role.ADMIN)
    form = MemberForm(request.POST)
    if not form.is_valid():
        return render_settings(request, project, member_form=form, status=400)
    user = form.cleaned_data["username"]
    try:
        projects.membership_set(project=project, user=user, role=form.cleaned_data["role"])
    except ServiceError as exc:
        form.add_error("role", exc.detail)
        return render_settings(request, project, member_form=form, status=400)
    messages.success(request, f"{user.username} is now {form.cleaned_data['role']} of {project.name}.")
    return redirect(_settings_url(project, "#members"))


@login_required
@require_POST
def member_role(request: AuthenticatedHttpRequest, project_id: int, user_id: int) -> HttpResponse:
    project = project_for(request, project_id, min_role=Role.ADMIN)
    user = member_for(project, user_id)
    form = RoleForm(request.POST, prefix=f"m{user.pk}")
    if not form.is_valid():
        messages.error(request, "Choose viewer, member or admin.")
        return redirect(_settings_url(project, "#members"))
    try:
        projects.membership_set(project=project, user=user, role=form.cleaned_data["role"])
    except ServiceError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"{user.username} is now {form.cleaned_data['role']}.")
    return redirect(_settings_url(project, "#members"))


@login_required
@require_POST
def member_remove(request: AuthenticatedHttpRequest, project_id: int, user_id: int) -> HttpResponse:
    project = project_for(request, project_id, min_role=Role.ADMIN)
    user = member_for(project, user_id)
    try:
        projects.membership_remove(project=project, user=user)
    except ServiceError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"{user.username} no longer belongs to {project.name}.")
    if user == request.user:
        return redirect("web:projects")
    return redirect(_settings_url(project, "#members"))


@login_required
@require_POST
def policy_preset(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_for(request, project_id, min_role=Role.ADMIN)
    form = PresetForm(request.POST)
    if not form.is_valid():
        return render_settings(request, project, preset_form=form, status=400)
    projects.policy_apply_preset(
        policy=projects.policy_ensure(project=project), preset_name=form.cleaned_data["preset"]
    )
    tasks.after_policy_change(project)
    messages.success(request, f"Applied the {form.cleaned_data['preset']!r} preset.")
    return redirect(_settings_url(project, "#policy"))


@login_required
@require_POST
def policy_update(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_for(request, project_id, min_role=Role.ADMIN)
    form = PolicyForm(request.POST, instance=projects.policy_ensure(project=project))
    if not form.is_valid():
        return render_settings(request, project, policy_form=form, status=400)
    policy = projects.policy_update(policy=form.instance, changes=form.cleaned_data)
    tasks.after_policy_change(project)
    messages.success(request, f"Policy saved ({policy.preset}).")
    return redirect(_settings_url(project, "#policy"))


@login_required
@require_POST
def upstream_key_update(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_for(request, project_id, min_role=Role.ADMIN)
    form = UpstreamKeyForm(request.POST)
    if not form.is_valid():
        return render_settings(request, project, upstream_key_form=form, status=400)
    try:
        projects.project_upstream_key_set(project=project, api_key=form.cleaned_data["api_key"])
    except ServiceError as exc:
        form.add_error("api_key", exc.detail)
        return render_settings(request, project, upstream_key_form=form, status=400)
    if project.upstream_api_key_hint:
        messages.success(request, f"The proxy's Anthropic API key is set ({project.upstream_api_key_hint}).")
    else:
        messages.success(request, "The proxy's Anthropic API key is removed: callers send their own.")
    return redirect(_settings_url(project, "#proxy"))


@login_required
@require_POST
def openai_key_update(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_for(request, project_id, min_role=Role.ADMIN)
    form = OpenAIKeyForm(request.POST)
    if not form.is_valid():
        return render_settings(request, project, openai_key_form=form, status=400)
    try:
        projects.project_provider_key_set(project=project, provider="openai", api_key=form.cleaned_data["api_key"])
    except ServiceError as exc:
        form.add_error("api_key", exc.detail)
        return render_settings(request, project, openai_key_form=form, status=400)
    if project.openai_api_key_hint:
        messages.success(request, f"The project's OpenAI API key is set ({project.openai_api_key_hint}).")
    else:
        messages.success(request, "The project's OpenAI API key is removed.")
    return redirect(_settings_url(project, "#summaries"))


# ----------------------------------------------------------------------------- API keys (the user's own)


def _keys_origin(request: AuthenticatedHttpRequest) -> Project | None:
    """The settings page a key form was posted from, if any. Resolved (and the user's right to it
    checked) before anything is written, so a refused request creates or revokes nothing."""
    project_id = request.POST.get("project") or request.GET.get("project")
    return project_for(request, project_id, min_role=Role.ADMIN) if project_id else None


def _keys_page(
    request: AuthenticatedHttpRequest, project: Project | None, *, status: int = 200, **extra: Any
) -> HttpResponse:
    if project is not None:
        return render_settings(request, project, status=status, **extra)
    context = {
        "keys": access.apikey_list_for(request.user),
        "key_form": extra.get("key_form") or ApiKeyForm(),
        "new_key": extra.get("new_key"),
    }
    return render(request, "sessions_app/keys.html", context, status=status)


@login_required
def keys(request: AuthenticatedHttpRequest) -> HttpResponse:
    return _keys_page(request, _keys_origin(request))


@login_required
@require_POST
def key_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    project = _keys_origin(request)
    form = ApiKeyForm(request.POST)
    if not form.is_valid():
        return _keys_page(request, project, key_form=form, status=400)
    key, raw = key_services.apikey_create(user=request.user, name=form.cleaned_data["name"])
    # Shown once, in this answer only: it is stored hashed.
    return _keys_page(request, project, new_key={"key": key, "raw": raw})


@login_required
@require_POST
def key_revoke(request: AuthenticatedHttpRequest, key_id: int) -> HttpResponse:
    key = apikey_for(request, key_id)
    project = _keys_origin(request)
    key_services.apikey_revoke(key=key)
    messages.success(request, f"Key {key.prefix}… revoked.")
    return redirect(_settings_url(project, "#keys") if project else "web:keys")
