from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from compaction.policy import PRESETS
from sessions_app import tasks
from sessions_app.errors import ServiceError
from sessions_app.models import (
    AgentSession,
    ApiKey,
    ArchiveEntry,
    Checkpoint,
    Compaction,
    CompactionPolicy,
    HandoffDocument,
    IngestRejection,
    McpCall,
    Membership,
    Message,
    MessageBackup,
    ModelProfile,
    Project,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
)
from sessions_app.services import agent_sessions, keys, projects, webhook_events, webhooks
from sessions_app.web import admin_budgets  # noqa: F401  # registers BudgetAdmin
from sessions_app.web.admin_lists import BigTableAdmin, EstimatedCountPaginator, RoleListFilter
from sessions_app.web.forms import PolicyForm, ProjectForm


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    form = ProjectForm
    list_display = ["name", "created_by", "created_at"]
    # The keys themselves are set on the project's settings page.
    readonly_fields = ["upstream_api_key_hint", "openai_api_key_hint"]
    search_fields = ["name", "description"]
    inlines = [MembershipInline]

    def save_model(self, request: HttpRequest, obj: Project, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        projects.policy_ensure(project=obj)  # every project has a policy, however it was made


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__username", "project__name"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["prefix", "user__username", "name"]
    fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def save_model(self, request: HttpRequest, obj: ApiKey, form, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        key, raw = keys.apikey_create(user=obj.user, name=obj.name)
        obj.pk = key.pk
        obj.prefix, obj.key_hash, obj.created_at = key.prefix, key.key_hash, key.created_at
        self.message_user(
            request, f"New API key for {obj.user} — copy it now, it is shown only once: {raw}", messages.WARNING
        )

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            keys.apikey_revoke(key=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "provider",
        "context_window",
        "max_output_tokens",
        "calibration_factor",
        "calibration_samples",
        "input_price_per_mtok",
        "cache_write_price_per_mtok",
        "cache_read_price_per_mtok",
        "output_price_per_mtok",
        "updated_at",
    ]
    list_editable = [
        "context_window",
        "input_price_per_mtok",
        "cache_write_price_per_mtok",
        "cache_read_price_per_mtok",
        "output_price_per_mtok",
    ]
    list_filter = ["provider"]
    search_fields = ["name"]

    # Lookups keep the rows for a few seconds per process (``usage.model_info``): this process sees an
    # edit as soon as it is committed, the others within that time; the sessions' stored levels
    # follow once a worker has worked them out again.
    def save_model(self, request: HttpRequest, obj: ModelProfile, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        transaction.on_commit(tasks.after_model_profile_change)

    def delete_model(self, request: HttpRequest, obj: ModelProfile) -> None:
        super().delete_model(request, obj)
        transaction.on_commit(tasks.after_model_profile_change)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ModelProfile]) -> None:
        super().delete_queryset(request, queryset)
        transaction.on_commit(tasks.after_model_profile_change)


def _preset_action(name: str) -> Callable[[admin.ModelAdmin, HttpRequest, QuerySet[CompactionPolicy]], None]:
    @admin.action(description=f"Apply the '{name}' preset")
    def apply(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[CompactionPolicy]) -> None:
        policies = list(queryset.select_related("project"))
        for policy in policies:
            projects.policy_apply_preset(policy=policy, preset_name=name)
            tasks.after_policy_change(policy.project)
        modeladmin.message_user(request, f"Applied the {name!r} preset to {len(policies)} polic(ies).")

    apply.__name__ = f"apply_preset_{name}"
    return apply


# Where each engine setting shows in the change form (a pair shares a line: a threshold as a fraction
# and in tokens); one the engine gains later lands in "Other".
_POLICY_FIELDSETS: list[tuple[str | None, list[str | tuple[str, str]]]] = [
    (None, ["project", "preset", "auto", "auto_continue", "proxy_compaction"]),
    ("Summaries", ["summarizer_provider", "summarizer_model"]),
    (
        "Thresholds",
        [
            ("remind", "remind_tokens"),
            ("compact", "compact_tokens"),
            ("summarize", "summarize_tokens"),
            ("handoff", "handoff_tokens"),
            "output_reserve",
        ],
    ),
    (
        "What a run does",
        [("target_after", "target_after_tokens"), "reversible_first", "min_saving_tokens", "summary_budget"],
    ),
    (
        "What is kept",
        [
            "keep_recent_turns",
            "keep_recent_messages",
            "protect_tool_tokens",
            "tail_fraction",
            "preserve_patterns",
        ],
    ),
    ("Retention", ["revert_hours", "prune_days", "context_doc_max_lines"]),
]


_THRESHOLD_HELP = "fraction of the window, or tokens (takes the place of the fraction)"


def _policy_groups() -> list[tuple[str | None, list[str | tuple[str, str]]]]:
    placed = {name for _, entries in _POLICY_FIELDSETS for entry in entries for name in _names(entry)}
    rest: list[str | tuple[str, str]] = [name for name in CompactionPolicy.ENGINE_FIELDS if name not in placed]
    return [*_POLICY_FIELDSETS, *([("Other", rest)] if rest else [])]


def _names(entry: str | tuple[str, str]) -> tuple[str, ...]:
    return (entry,) if isinstance(entry, str) else entry


class PolicyAdminForm(PolicyForm):
    """The settings page's form (one preserve pattern per line, the model's clean) with the project."""

    class Meta(PolicyForm.Meta):
        fields = ["project", *CompactionPolicy.ENGINE_FIELDS]


@admin.register(CompactionPolicy)
class CompactionPolicyAdmin(admin.ModelAdmin):
    """Edited through the same form and service as the settings page and the API: validated by the
    engine, labelled with the preset its numbers equal (else "custom"), and the project's sessions
    re-evaluated. ``preset`` changes through the actions only."""

    form = PolicyAdminForm
    list_display = ["project", "preset", "remind", "compact", "summarize", "handoff", "output_reserve", "auto"]
    list_filter = ["preset", "auto"]
    search_fields = ["project__name"]
    list_select_related = ["project"]
    actions = [_preset_action(name) for name in PRESETS]
    fieldsets = [
        (title, {"fields": tuple(entries), "description": _THRESHOLD_HELP if title == "Thresholds" else ""})
        for title, entries in _policy_groups()
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: CompactionPolicy | None = None) -> list[str]:
        # A project has one policy for good; an existing one doesn't move to another project.
        return ["preset", "project"] if obj is not None else ["preset"]

    def save_model(self, request: HttpRequest, obj: CompactionPolicy, form: PolicyForm, change: bool) -> None:
        changes = {name: value for name, value in form.cleaned_data.items() if name in CompactionPolicy.ENGINE_FIELDS}
        projects.policy_update(policy=obj, changes=changes)
        tasks.after_policy_change(obj.project)


class IngestRejectionInline(admin.TabularInline):
    """What a recorded transcript held that could not be stored (the rest of it was)."""

    model = IngestRejection
    fields = readonly_fields = ("created_at", "source", "position", "code", "detail")
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: AgentSession | None = None) -> bool:
        return False


@admin.register(McpCall)
class McpCallAdmin(admin.ModelAdmin):
    """What agents asked ctxweb's MCP tools for (docs/SEARCH.md): read-only, a record of what happened."""

    list_display = ["created_at", "session", "tool", "asked", "found", "chars", "user"]
    list_filter = ["tool", "found"]
    search_fields = ["session__name", "session__external_id", "asked"]
    list_select_related = ["session", "user"]
    readonly_fields = [f.name for f in McpCall._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: McpCall | None = None) -> bool:
        return False


@admin.register(IngestRejection)
class IngestRejectionAdmin(admin.ModelAdmin):
    """Lines or messages of recorded transcripts that were skipped: read-only, they record what happened."""

    list_display = ["created_at", "session", "source", "position", "code", "detail"]
    list_filter = ["source", "code"]
    search_fields = ["session__name", "session__external_id", "position", "detail"]
    list_select_related = ["session"]
    readonly_fields = [f.name for f in IngestRejection._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: IngestRejection | None = None) -> bool:
        return False


@admin.register(AgentSession)
class AgentSessionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "project", "external_id", "model", "status", "message_count", "last_activity_at"]
    list_filter = ["status", "model", "project"]
    search_fields = ["name", "external_id", "model"]
    raw_id_fields = ["parent", "owner"]
    list_select_related = ["project"]
    show_full_result_count = False  # one count per page, not two
    readonly_fields = [
        "last_seq",
        "message_count",
        "active_message_count",
        "message_tokens",
        "summary_tokens",
        "system_tokens",
        "tool_tokens",
        "exact_tokens",
        "exact_upto_seq",
        "exact_cached",
        "exact_counted_at",
        "level",
        "usage_percent",
        "rejected_count",
        "rejected_reason",
        "redactions",
        "unrecorded_requests",
        "unrecorded_from",
        "unrecorded_to",
    ]
    inlines = [IngestRejectionInline]

    def save_model(self, request: HttpRequest, obj: AgentSession, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        webhook_events.session_level_record(obj)  # its model, window or project may have changed

    # Through the service: a session's provider requests leave the project's spend rollup with it.
    def delete_model(self, request: HttpRequest, obj: AgentSession) -> None:
        agent_sessions.session_delete(session=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[AgentSession]) -> None:
        for session in queryset:
            agent_sessions.session_delete(session=session)


@admin.register(Message)
class MessageAdmin(BigTableAdmin):
    list_display = ["session", "seq", "role", "state", "tokens", "client_id", "created_at"]
    list_filter = [RoleListFilter, "state"]
    raw_id_fields = ["session", "compaction"]
    list_select_related = ["session"]


@admin.register(Compaction)
class CompactionAdmin(BigTableAdmin):
    list_display = ["id", "session", "level", "status", "trigger", "tokens_before", "tokens_after", "created_at"]
    list_filter = ["status", "level", "trigger"]
    raw_id_fields = ["session", "requested_by"]
    list_select_related = ["session"]


@admin.register(MessageBackup)
class MessageBackupAdmin(admin.ModelAdmin):
    list_display = ["id", "compaction", "message", "state", "tokens", "created_at"]
    raw_id_fields = ["compaction", "message", "previous_compaction"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ["session", "version", "reason", "tokens", "lossy", "reverted", "created_at"]
    list_filter = ["reason", "reverted"]
    raw_id_fields = ["session", "compaction"]


@admin.register(HandoffDocument)
class HandoffDocumentAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "checkpoint", "continuation", "created_at"]
    raw_id_fields = ["session", "checkpoint", "continuation", "created_by"]


@admin.register(ArchiveEntry)
class ArchiveEntryAdmin(admin.ModelAdmin):
    """The pruner's log: read-only, it records what happened."""

    list_display = ["created_at", "kind", "project", "session", "items", "what"]
    list_filter = ["kind"]
    search_fields = ["what", "content_hash", "project__name"]
    readonly_fields = [f.name for f in ArchiveEntry._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ArchiveEntry | None = None) -> bool:
        return False


class WebhookAdminForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    events = forms.MultipleChoiceField(choices=WebhookEvent.choices, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = Webhook
        fields = ["project", "name", "url", "secret", "events", "format", "enabled"]

    def clean(self) -> dict[str, Any]:
        # The same checks as the settings page and the API (the URL's scheme and address, the events).
        data = super().clean() or {}
        if not self.errors:
            try:
                data.update(
                    webhooks.webhook_fields_check(
                        url=data["url"], events=data["events"], name=data.get("name", ""), format=data["format"]
                    )
                )
            except ServiceError as exc:
                raise forms.ValidationError(exc.detail) from None
        return data


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    extra = 0
    can_delete = False
    readonly_fields = ["at", "status_code", "error", "duration_ms"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookAdminForm
    list_display = ["__str__", "project", "format", "enabled", "created_at"]
    list_filter = ["enabled", "format"]
    search_fields = ["name", "url", "project__name"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["pk", "webhook", "event", "status", "attempts", "last_status_code", "created_at"]
    list_filter = ["status", "event"]
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]
    inlines = [WebhookAttemptInline]
