"""The browser's forms: they parse and validate input; services do the work."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from compaction import redact
from compaction.policy import PRESETS, TOKEN_FIELDS
from compaction.types import Level, level_choices
from sessions_app.models import CompactionPolicy, Project, Role, SessionStatus, WebhookEvent, WebhookFormat
from sessions_app.services import redaction
from sessions_app.services.projects import PROJECT_DESCRIPTION_MAX, PROJECT_NAME_MAX

MAX_ID = 2**63 - 1  # a bigint: the database refuses a larger one in a query


class CompactionForm(forms.Form):
    level = forms.ChoiceField(choices=level_choices(), initial=Level.COMPACT.value)
    instructions = forms.CharField(
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Optional: what the summary should focus on.",
    )


class HandoffForm(forms.Form):
    continue_session = forms.BooleanField(
        required=False, label="Also start the continuation session (this one is closed)"
    )


class SessionFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search", max_length=200)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *SessionStatus.choices])
    level = forms.ChoiceField(
        required=False,
        choices=[("", "any level"), *[(level.value, level.value) for level in Level]],
    )
    model = forms.CharField(required=False, max_length=100)
    # Ids, not choices: a link from the dashboard may name a former member or someone else's key.
    owner = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID, widget=forms.Select)
    key = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID, label="API key id")

    def __init__(self, *args: Any, members: list[tuple[int, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["owner"].widget.choices = [("", "anyone"), *members]


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)

    def clean_username(self) -> Any:
        name = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=name, is_active=True).first()
        if user is None:
            raise forms.ValidationError(f"No active user is called {name!r}.")
        return user


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class PresetForm(forms.Form):
    preset = forms.ChoiceField(choices=[(name, name) for name in PRESETS])


class PolicyForm(forms.ModelForm):
    """The policy's settings, validated by the model's ``clean`` (``compaction.policy.validate``):
    the settings page's form, and Django admin's (``admin.CompactionPolicyAdmin``)."""

    preserve_patterns = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One regular expression per line; matching lines are never removed.",
    )
    redact_off = forms.MultipleChoiceField(
        required=False,
        choices=[(kind, kind) for kind in (*redact.kinds(), redact.CUSTOM)],
        widget=forms.CheckboxSelectMultiple,
        help_text="Kinds of secret not looked for in what is stored (false positives).",
    )
    redact_patterns = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The project's own secrets: one regular expression per line (its first group, if any, "
        "is the secret). Validated like the preserve patterns.",
    )

    class Meta:
        model = CompactionPolicy
        fields = list(CompactionPolicy.ENGINE_FIELDS)  # every setting the engine's Policy takes

    # Each threshold in tokens right after its fraction: one or the other, side by side.
    field_order = [
        name
        for fraction in CompactionPolicy.ENGINE_FIELDS
        if fraction not in TOKEN_FIELDS.values()
        for name in (fraction, TOKEN_FIELDS.get(fraction))
        if name is not None
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            self.initial["preserve_patterns"] = "\n".join(self.instance.preserve_patterns or [])
            self.initial["redact_patterns"] = "\n".join(self.instance.redact_patterns or [])

    def clean_preserve_patterns(self) -> list[str]:
        # One per line; whether each is a regular expression is the engine's check (the model's clean).
        return [line.strip() for line in self.cleaned_data["preserve_patterns"].splitlines() if line.strip()]

    def clean_redact_patterns(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["redact_patterns"].splitlines() if line.strip()]

    def clean_redact_off(self) -> list[str]:
        return list(self.cleaned_data["redact_off"])


class ApiKeyForm(forms.Form):
    name = forms.CharField(required=False, max_length=100, help_text="What the key is for, e.g. the agent's host.")


def _sealed_key_field(provider: str, used_for: str) -> forms.CharField:
    """A provider's API key a project keeps sealed: typed once, never shown again but its end."""
    return forms.CharField(
        label=f"{provider} API key",
        required=False,
        max_length=500,
        strip=True,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        help_text=f"{used_for} Stored encrypted; only its last characters are shown. Empty: remove it.",
    )


class UpstreamKeyForm(forms.Form):
    api_key = _sealed_key_field(
        "Anthropic",
        "Sent upstream for the proxy's requests that come without a key of their own, and used for summaries "
        "when the policy's summarizer provider is Anthropic.",
    )


class OpenAIKeyForm(forms.Form):
    api_key = _sealed_key_field("OpenAI", "Used for summaries when the policy's summarizer provider is OpenAI.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "id_openai_%s")  # the page's Anthropic key form has id_api_key
        super().__init__(*args, **kwargs)


class ProjectForm(forms.ModelForm):
    """A project as admin edits it, with the same limits as the API and ``project_create``."""

    name = forms.CharField(max_length=PROJECT_NAME_MAX)
    description = forms.CharField(required=False, max_length=PROJECT_DESCRIPTION_MAX, widget=forms.Textarea)

    class Meta:
        model = Project
        fields = ["name", "description", "context_document", "created_by"]

    def clean_context_document(self) -> str:
        """Redacted as everything sessions send is (a team pastes into it what agents print); a new
        project, without rules of its own yet, by the built-in ones."""
        return redaction.project_text_redact(
            self.instance if self.instance.pk else None, self.cleaned_data["context_document"]
        )


class WebhookForm(forms.Form):
    """A webhook's fields; the service checks the URL (scheme, private addresses) and the events again."""

    name = forms.CharField(max_length=100, required=False)
    url = forms.CharField(label="URL", max_length=2000, widget=forms.URLInput(attrs={"placeholder": "https://"}))
    events = forms.MultipleChoiceField(
        choices=WebhookEvent.choices, widget=forms.CheckboxSelectMultiple, initial=list(WebhookEvent.values)
    )
    format = forms.ChoiceField(choices=WebhookFormat.choices, initial=WebhookFormat.JSON)
    enabled = forms.BooleanField(required=False, initial=True)
