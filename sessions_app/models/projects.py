"""Projects and who may do what in them: members and roles, API keys, the compaction policy, and the
model profiles (windows and calibration) admins edit."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from compaction import model_catalog
from compaction import policy as engine_policy

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    MEMBER = "member", "Member"
    ADMIN = "admin", "Admin"


ROLE_RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2}


class Project(models.Model):
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # The team's long-lived "project-context.md": pruned to the policy's line limit (docs/OPERATIONS.md, "The pruner").
    context_document = models.TextField(blank=True)
    # The Anthropic API key the proxy forwards with when the caller sends none, set by the project's
    # admins: sealed (services/sealing.py), never shown again but for its last characters.
    upstream_api_key = models.TextField(blank=True)
    upstream_api_key_hint = models.CharField(max_length=16, blank=True)
    # The project's OpenAI API key, for summaries by an OpenAI model (the policy's summarizer_provider):
    # sealed as the Anthropic one is, never shown again but for its last characters.
    openai_api_key = models.TextField(blank=True)
    openai_api_key_hint = models.CharField(max_length=16, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    members: models.ManyToManyField[User, Membership] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} · {self.project} ({self.role})"


class ApiKey(models.Model):
    """A per-user bearer key. Only a SHA-256 of the key is stored; the key is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


def _price_field(label: str, what: str) -> models.DecimalField:
    return models.DecimalField(
        label,
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text=f"US dollars per million {what}. Empty: the data package's price.",
    )


class ModelProfile(models.Model):
    name = models.CharField(
        max_length=100,
        unique=True,
        help_text="A model name (its dated versions match too), e.g. claude-sonnet-4-5, or a pattern: a prefix "
        "ending in *, e.g. claude-sonnet-* (the longest match wins; a name matching exactly wins over any pattern).",
    )
    provider = models.CharField(max_length=30, default="anthropic")
    # Every figure left empty comes from the genai-prices package (compaction.model_catalog), else
    # the fallback: a row overrides only what it sets.
    context_window = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens of input the model takes. Empty: the data package's figure."
    )
    max_output_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Empty: the built-in figure for the model."
    )
    calibration_factor = models.FloatField(
        default=1.0, help_text="Exact ÷ offline estimate; scales every offline count shown for this model."
    )
    calibration_samples = models.PositiveIntegerField(default=0)
    input_price_per_mtok = _price_field("input price ($/Mtok)", "input tokens (uncached)")
    cache_write_price_per_mtok = _price_field("cache write price ($/Mtok)", "tokens written to the prompt cache")
    cache_read_price_per_mtok = _price_field("cache read price ($/Mtok)", "tokens read from the prompt cache")
    output_price_per_mtok = _price_field("output price ($/Mtok)", "output tokens")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        problem = model_catalog.profile_name_problem(self.name)
        if problem:
            raise ValidationError({"name": problem})
        if not 0.2 <= self.calibration_factor <= 5:
            raise ValidationError({"calibration_factor": "A calibration factor between 0.2 and 5 is plausible."})
        if self.context_window is not None and self.context_window < 1024:
            raise ValidationError({"context_window": "A context window is at least 1,024 tokens."})


def _threshold_tokens_field(what: str = "Or in tokens") -> models.PositiveIntegerField:
    return models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text=f"{what}: takes the place of the fraction on a larger window. Empty: the fraction.",
    )


class CompactionPolicy(models.Model):
    """A project's thresholds and rules. Presets (compaction.policy.PRESETS) fill it in."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="policy")
    preset = models.CharField(max_length=30, default="default", help_text="The preset last applied, or 'custom'.")
    remind = models.FloatField(default=0.60)
    compact = models.FloatField(default=0.70)
    summarize = models.FloatField(default=0.85)
    handoff = models.FloatField(default=0.95)
    # Thresholds in tokens (seed 002's "above 90k"): one set takes the place of its fraction on a window
    # larger than it (compaction.policy.Policy.for_window); empty, the fraction alone counts.
    remind_tokens = _threshold_tokens_field()
    compact_tokens = _threshold_tokens_field()
    summarize_tokens = _threshold_tokens_field()
    handoff_tokens = _threshold_tokens_field()
    output_reserve = models.FloatField(default=0.10, help_text="Share of the window kept for the reply.")
    keep_recent_turns = models.PositiveIntegerField(default=2)
    protect_tool_tokens = models.PositiveIntegerField(
        default=0, help_text="The newest tokens of tool output no strategy clears (OpenCode protects 40,000)."
    )
    target_after = models.FloatField(default=0.50, help_text="Share of the window a run brings usage down to.")
    target_after_tokens = _threshold_tokens_field("Or the tokens a run brings usage down to")
    reversible_first = models.BooleanField(
        default=True, help_text="At the compact level, run the reversible strategies before summarizing anything."
    )
    tail_fraction = models.FloatField(
        default=0.50, help_text="Most of the window the verbatim tail after a summary may take."
    )
    keep_recent_messages = models.PositiveIntegerField(
        default=2,
        help_text="The newest messages no strategy touches (they yield only when they alone overflow the window).",
    )
    summary_budget = models.PositiveIntegerField(
        default=10_000,
        help_text="Tokens the whole checkpoint may take in the context, the facts it carries included "
        "(the summarizer writes at most 1,000 of them).",
    )
    min_saving_tokens = models.PositiveIntegerField(default=500)
    revert_hours = models.PositiveIntegerField(default=24)
    prune_days = models.PositiveIntegerField(default=30)
    context_doc_max_lines = models.PositiveIntegerField(default=500)
    auto = models.BooleanField(default=True, help_text="Compact automatically when a threshold is crossed.")
    auto_continue = models.BooleanField(
        default=False, help_text="At the handoff level, close the session and continue in a fresh linked one."
    )
    proxy_compaction = models.BooleanField(
        default=False,
        help_text="Requests through the Anthropic-compatible proxy go upstream as the compacted context "
        "(checkpoint and kept messages) once a compaction has run; the agent's own history is untouched.",
    )
    summarizer_provider = models.CharField(
        max_length=20,
        choices=list(engine_policy.SUMMARIZER_PROVIDERS.items()),
        default="anthropic",
        help_text="Who writes summaries: a model of this provider, with the project's API key for it "
        "(else the server's); the offline extractive summarizer when there is no key, or always with offline.",
    )
    summarizer_model = models.CharField(
        max_length=100, default="claude-haiku-4-5", help_text="A model of the summarizer's provider."
    )
    preserve_patterns = models.JSONField(default=list, blank=True)
    redact_off = models.JSONField(
        default=list, blank=True, help_text="Kinds of secret not looked for in what is stored (false positives)."
    )
    redact_patterns = models.JSONField(
        default=list,
        blank=True,
        help_text="The project's own secrets: regular expressions (the first group, if any, is the secret).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    ENGINE_FIELDS = tuple(f for f in engine_policy.Policy.__dataclass_fields__)

    class Meta:
        verbose_name_plural = "compaction policies"

    def __str__(self) -> str:
        return f"{self.project} policy ({self.preset})"

    def clean(self) -> None:
        errors = engine_policy.validate({name: getattr(self, name) for name in self.ENGINE_FIELDS})
        if errors:
            raise ValidationError(errors)

    def to_engine(self) -> engine_policy.Policy:
        values = {name: getattr(self, name) for name in self.ENGINE_FIELDS}
        if not values["preserve_patterns"]:
            values["preserve_patterns"] = engine_policy.DEFAULT_PRESERVE_PATTERNS
        return engine_policy.Policy.from_mapping(values)

    def apply_engine(self, policy: engine_policy.Policy, *, preset_name: str) -> None:
        for name, value in policy.as_dict().items():
            if name not in engine_policy.NOT_IN_PRESETS:
                setattr(self, name, value)
        self.preset = preset_name
