"""The project's webhooks page (project admins): add, change, delete, send a test, read the log."""

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
from sessions_app.models import Project, Role, Webhook, WebhookEvent
from sessions_app.services import webhooks
from sessions_app.web.access import AuthenticatedHttpRequest, project_for, webhook_for
from sessions_app.web.forms import WebhookForm

LOG_ROWS = 20  # deliveries shown per webhook; the API pages through all of them


def _page_url(project_id: int, anchor: str = "") -> str:
    return reverse("web:project-webhooks", args=[project_id]) + anchor


def render_webhooks(
    request: AuthenticatedHttpRequest, project: Project, *, form: WebhookForm | None = None, status: int = 200
) -> HttpResponse:
    hooks = list(Webhook.objects.filter(project=project))
    rows = [
        {
            "hook": hook,
            "form": WebhookForm(
                prefix=f"w{hook.pk}",
                initial={
                    "name": hook.name,
                    "url": hook.url,
                    "events": hook.events,
                    "format": hook.format,
                    "enabled": hook.enabled,
                },
            ),
            "deliveries": list(hook.deliveries.prefetch_related("log")[:LOG_ROWS]),
            "event_labels": [WebhookEvent(e).label for e in hook.events if e in WebhookEvent.values],
        }
        for hook in hooks
    ]
    context: dict[str, Any] = {"project": project, "rows": rows, "form": form or WebhookForm()}
    return render(request, "sessions_app/webhooks.html", context, status=status)


@login_required
def webhook_list(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    return render_webhooks(request, project_for(request, project_id, min_role=Role.ADMIN))


@login_required
@require_POST
def webhook_add(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_for(request, project_id, min_role=Role.ADMIN)
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return render_webhooks(request, project, form=form, status=400)
    try:
        hook = webhooks.webhook_create(project=project, user=request.user, **form.cleaned_data)
    except ServiceError as exc:
        form.add_error("url" if exc.field == "url" else None, exc.detail)
        return render_webhooks(request, project, form=form, status=400)
    messages.success(request, f"Webhook {hook} added. Its secret is below; send a test to check it.")
    return redirect(_page_url(project.pk, f"#webhook-{hook.pk}"))


@login_required
@require_POST
def webhook_edit(request: AuthenticatedHttpRequest, webhook_id: int) -> HttpResponse:
    hook = webhook_for(request, webhook_id)
    form = WebhookForm(request.POST, prefix=f"w{hook.pk}")
    if not form.is_valid():
        messages.error(request, "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()))
        return redirect(_page_url(hook.project_id, f"#webhook-{hook.pk}"))
    try:
        webhooks.webhook_update(webhook=hook, rotate_secret="rotate_secret" in request.POST, **form.cleaned_data)
    except ServiceError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Webhook {hook} saved.")
    return redirect(_page_url(hook.project_id, f"#webhook-{hook.pk}"))


@login_required
@require_POST
def webhook_delete(request: AuthenticatedHttpRequest, webhook_id: int) -> HttpResponse:
    hook = webhook_for(request, webhook_id)
    project_id, label = hook.project_id, str(hook)
    webhooks.webhook_delete(webhook=hook)
    messages.success(request, f"Webhook {label} deleted.")
    return redirect(_page_url(project_id))


@login_required
@require_POST
def webhook_send_test(request: AuthenticatedHttpRequest, webhook_id: int) -> HttpResponse:
    hook = webhook_for(request, webhook_id)
    delivery = webhooks.webhook_test(webhook=hook, user=request.user)
    tasks.webhooks_send()
    messages.success(request, f"Test {delivery.pk} sent to {hook}; its result is in the log below (reload).")
    return redirect(_page_url(hook.project_id, f"#webhook-{hook.pk}"))
