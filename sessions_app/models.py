"""ctxweb's data model. Rules live in services.py / selectors.py; models hold data and constraints."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from compaction import policy as engine_policy
from compaction.types import level_choices


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
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
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


class ModelProfile(models.Model):
    name = models.CharField(
        max_length=100, unique=True, help_text="Model name or a prefix of it, e.g. claude-sonnet-4-5"
    )
    provider = models.CharField(max_length=30, default="anthropic")
    context_window = models.PositiveIntegerField()
    max_output_tokens = models.PositiveIntegerField(default=8192)
    calibration_factor = models.FloatField(
        default=1.0, help_text="Exact ÷ offline estimate; scales every offline count shown for this model."
    )
    calibration_samples = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not 0.2 <= self.calibration_factor <= 5:
            raise ValidationError({"calibration_factor": "A calibration factor between 0.2 and 5 is plausible."})
        if self.context_window < 1024:
            raise ValidationError({"context_window": "A context window is at least 1,024 tokens."})


class CompactionPolicy(models.Model):
    """A project's thresholds and rules. Presets (compaction.policy.PRESETS) fill it in."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="policy")
    preset = models.CharField(max_length=30, default="default", help_text="The preset last applied, or 'custom'.")
    remind = models.FloatField(default=0.60)
    compact = models.FloatField(default=0.70)
    summarize = models.FloatField(default=0.85)
    handoff = models.FloatField(default=0.95)
    output_reserve = models.FloatField(default=0.10, help_text="Share of the window kept for the reply.")
    keep_recent_turns = models.PositiveIntegerField(default=2)
    protect_tool_tokens = models.PositiveIntegerField(default=40_000)
    tail_fraction = models.FloatField(default=0.30)
    keep_recent_messages = models.PositiveIntegerField(default=6)
    summary_budget = models.PositiveIntegerField(default=1_000)
    min_saving_tokens = models.PositiveIntegerField(default=500)
    revert_hours = models.PositiveIntegerField(default=24)
    prune_days = models.PositiveIntegerField(default=30)
    context_doc_max_lines = models.PositiveIntegerField(default=500)
    auto = models.BooleanField(default=True, help_text="Compact automatically when a threshold is crossed.")
    summarizer_model = models.CharField(max_length=100, default="claude-haiku-4-5")
    preserve_patterns = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    ENGINE_FIELDS = tuple(f for f in engine_policy.Policy.__dataclass_fields__)

    class Meta:
        verbose_name_plural = "compaction policies"

    def __str__(self) -> str:
        return f"{self.project} policy ({self.preset})"

    def clean(self) -> None:
        errors = engine_policy.validate({name: getattr(self, name) for name in self.ENGINE_FIELDS})
        if not isinstance(self.preserve_patterns, list) or not all(isinstance(p, str) for p in self.preserve_patterns):
            errors["preserve_patterns"] = "A list of regular expressions."
        if errors:
            raise ValidationError(errors)

    def to_engine(self) -> engine_policy.Policy:
        values = {name: getattr(self, name) for name in self.ENGINE_FIELDS}
        if not values["preserve_patterns"]:
            values["preserve_patterns"] = engine_policy.DEFAULT_PRESERVE_PATTERNS
        return engine_policy.Policy.from_mapping(values)

    def apply_engine(self, policy: engine_policy.Policy, *, preset_name: str) -> None:
        for name, value in policy.as_dict().items():
            setattr(self, name, value)
        self.preset = preset_name


class SessionStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    HANDED_OFF = "handed_off", "Handed off"
    ARCHIVED = "archived", "Archived"


class AgentSession(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sessions")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    name = models.CharField(max_length=200, blank=True)
    external_id = models.CharField(max_length=200, blank=True, default="")
    model = models.CharField(max_length=100, default="claude-sonnet-4-5")
    context_window_override = models.PositiveIntegerField(null=True, blank=True)
    system_prompt = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=12, choices=SessionStatus.choices, default=SessionStatus.ACTIVE)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="continuations")
    auto_compact = models.BooleanField(null=True, blank=True, help_text="Empty: the project policy decides.")
    metadata = models.JSONField(default=dict, blank=True)

    # Running totals kept by services.message_append and the compaction services, so status
    # never re-tokenizes the session. Token figures are raw offline counts (see compaction.tokens).
    last_seq = models.PositiveIntegerField(default=0)
    message_count = models.PositiveIntegerField(default=0)
    active_message_count = models.PositiveIntegerField(default=0)
    message_tokens = models.PositiveBigIntegerField(default=0)
    summary_tokens = models.PositiveIntegerField(default=0)
    system_tokens = models.PositiveIntegerField(default=0)
    tool_tokens = models.PositiveIntegerField(default=0)
    # Anthropic's exact count of the whole request, valid while exact_upto_seq == last_seq.
    exact_tokens = models.PositiveIntegerField(null=True, blank=True)
    exact_upto_seq = models.PositiveIntegerField(null=True, blank=True)
    exact_counted_at = models.DateTimeField(null=True, blank=True)
    count_warning = models.CharField(max_length=500, blank=True)

    compaction_failures = models.PositiveIntegerField(default=0)
    auto_paused = models.BooleanField(default=False)
    # Lines or messages of a recorded transcript that could not be stored (IngestRejection has each).
    rejected_count = models.PositiveIntegerField(default=0)
    rejected_reason = models.CharField(max_length=500, blank=True, help_text="Why the latest one was skipped.")

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_activity_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-last_activity_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], condition=~Q(external_id=""), name="session_external_id_unique"
            )
        ]
        indexes = [models.Index(fields=["project", "status", "-last_activity_at"], name="session_project_status")]

    def __str__(self) -> str:
        return self.name or self.external_id or f"session {self.pk}"


class MessageState(models.TextChoices):
    ACTIVE = "active", "Active"
    COMPACTED = "compacted", "Compacted"
    SUMMARIZED = "summarized", "Summarized"
    ARCHIVED = "archived", "Archived"


# The states whose messages a model sees: untouched, or shrunk by a reversible compaction.
CONTEXT_STATES = (MessageState.ACTIVE, MessageState.COMPACTED)


class Message(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10)
    content = models.JSONField()
    tokens = models.PositiveIntegerField(help_text="Raw offline estimate, framing included.")
    tokens_exact = models.PositiveIntegerField(null=True, blank=True)
    # NULL, not "": the partial unique constraint below must ignore messages sent without an id.
    client_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    state = models.CharField(max_length=12, choices=MessageState.choices, default=MessageState.ACTIVE)
    compaction = models.ForeignKey(
        "Compaction", null=True, blank=True, on_delete=models.SET_NULL, related_name="changed_messages"
    )
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_seq_unique"),
            models.UniqueConstraint(
                fields=["session", "client_id"], condition=Q(client_id__isnull=False), name="message_client_id_unique"
            ),
        ]
        indexes = [models.Index(fields=["session", "state", "seq"], name="message_session_state_seq")]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.role}"


class ToolUse(models.Model):
    """Index of tool_use ids per session, so a tool_result can be checked against an earlier call
    without scanning message JSON (works the same on Postgres and SQLite)."""

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="tool_uses")
    tool_use_id = models.CharField(max_length=255)
    seq = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["session", "tool_use_id"], name="tooluse_session_id")]

    def __str__(self) -> str:
        return f"{self.tool_use_id} (session {self.session_id}, seq {self.seq})"


class IngestRejection(models.Model):
    """A line or message of a recorded transcript (sync or import) that was skipped because it could
    not be stored: the rest of the transcript went on. Shown in STATUS warnings and in admin."""

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="rejections")
    source = models.CharField(max_length=20, help_text="transcript (sync) or import")
    position = models.CharField(max_length=200, help_text="Which line or message")
    code = models.CharField(max_length=50)
    detail = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["session", "-created_at"], name="rejection_session_created")]

    def __str__(self) -> str:
        return f"{self.position}: {self.code}"


# Starts the note a compaction carries when the offline summarizer stood in for an unavailable model;
# STATUS shows such notes as warnings.
FALLBACK_NOTE = "The summarizer model was unavailable"


class CompactionStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    REVERTED = "reverted", "Reverted"
    SKIPPED = "skipped", "Skipped"


ACTIVE_COMPACTION_STATUSES = (CompactionStatus.QUEUED, CompactionStatus.RUNNING)


class Compaction(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="compactions")
    level = models.CharField(max_length=10, choices=level_choices())
    status = models.CharField(max_length=10, choices=CompactionStatus.choices, default=CompactionStatus.QUEUED)
    trigger = models.CharField(max_length=10, choices=[("auto", "Automatic"), ("manual", "Manual")], default="auto")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    instructions = models.TextField(blank=True)
    upto_seq = models.PositiveIntegerField(null=True, blank=True, help_text="Messages up to this seq were planned.")
    items = models.JSONField(default=list, blank=True)
    tokens_before = models.PositiveIntegerField(null=True, blank=True)
    tokens_after = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    notes = models.JSONField(default=list, blank=True, help_text="Why it did less than asked, in plain words.")
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    revertible_until = models.DateTimeField(null=True, blank=True)
    reverted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # The database, not only the code, keeps it to one compaction at a time per session.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status__in=["queued", "running"]),
                name="compaction_one_active_per_session",
            )
        ]
        indexes = [
            models.Index(fields=["session", "-created_at"], name="compaction_session_created"),
            models.Index(
                fields=["status", "started_at"],
                name="compaction_pending",
                condition=Q(status__in=["queued", "running"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.level} of {self.session_id} ({self.status})"

    @property
    def saved_tokens(self) -> int | None:
        if self.tokens_before is None or self.tokens_after is None:
            return None
        return self.tokens_before - self.tokens_after


class MessageBackup(models.Model):
    """A message exactly as it was before a compaction changed it; restored byte for byte by revert."""

    compaction = models.ForeignKey(Compaction, on_delete=models.CASCADE, related_name="backups")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="backups")
    content = models.JSONField()
    tokens = models.PositiveIntegerField()
    tokens_exact = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=12, choices=MessageState.choices)
    previous_compaction = models.ForeignKey(
        Compaction, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["compaction", "message"], name="backup_unique")]

    def __str__(self) -> str:
        return f"backup of message {self.message_id} (compaction {self.compaction_id})"


class Checkpoint(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="checkpoints")
    version = models.PositiveIntegerField()
    data = models.JSONField(help_text="The structured summary: objective, completed, in_progress, pending, …")
    reason = models.CharField(max_length=30, default="compaction")
    compaction = models.ForeignKey(
        Compaction, null=True, blank=True, on_delete=models.SET_NULL, related_name="checkpoints"
    )
    upto_seq = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(default=0)
    lossy = models.BooleanField(default=True)
    reverted = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "-version"]
        constraints = [models.UniqueConstraint(fields=["session", "version"], name="checkpoint_version_unique")]

    def __str__(self) -> str:
        return f"checkpoint v{self.version} of {self.session_id}"


class HandoffDocument(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="handoffs")
    checkpoint = models.ForeignKey(
        Checkpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="handoffs"
    )
    text = models.TextField()
    markdown = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    continuation = models.ForeignKey(
        AgentSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="seeded_by"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"handoff {self.pk} of {self.session_id}"


class ArchiveKind(models.TextChoices):
    MESSAGES = "messages", "Messages of an inactive session archived"
    BACKUPS = "backups", "Revert backups purged"
    CONTEXT_DOCUMENT = "context_document", "Context document trimmed"


class ArchiveEntry(models.Model):
    """The archive log (docs/OPERATIONS.md, "The pruner"): what the pruner moved or purged, when, its content hash,
    and where it went. A trimmed context document's old part is kept here verbatim."""

    kind = models.CharField(max_length=20, choices=ArchiveKind.choices)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="archive_entries")
    session = models.ForeignKey(
        AgentSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="archive_entries"
    )
    what = models.CharField(max_length=500)
    items = models.PositiveIntegerField(default=0, help_text="Messages, backups or lines.")
    content_hash = models.CharField(max_length=64, help_text="SHA-256 of what was archived or purged.")
    location = models.CharField(max_length=300, help_text="Where it went.")
    content = models.TextField(blank=True, help_text="The archived text itself, for a trimmed context document.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "archive entries"

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.what}"
