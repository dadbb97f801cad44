"""Compactions and what they leave behind: backups for revert, checkpoints, handoff documents."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from compaction.types import level_choices
from sessions_app.models.sessions import AgentSession, Message, MessageState

# Starts the note a compaction carries when the offline summarizer stood in for an unavailable model;
# STATUS shows such notes as warnings.
FALLBACK_NOTE = "The summarizer model was unavailable"
# A note of an automatic run that could not reach its target and stepped up to handoff.
STEP_UP_NOTE = "Stepped up to handoff"


class CompactionStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    REVERTED = "reverted", "Reverted"
    SKIPPED = "skipped", "Skipped"


ACTIVE_COMPACTION_STATUSES = (CompactionStatus.QUEUED, CompactionStatus.RUNNING)


class Compaction(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="compactions", db_index=False)
    # The session's project (a session never moves; whoever creates the row sets it): the dashboard
    # reads a project's compactions of the last days from its own index range, not through every
    # session of the project.
    project = models.ForeignKey("sessions_app.Project", on_delete=models.CASCADE, related_name="+", db_index=False)
    level = models.CharField(max_length=10, choices=level_choices())
    status = models.CharField(max_length=10, choices=CompactionStatus.choices, default=CompactionStatus.QUEUED)
    # "transcript": the agent compacted its own context and its transcript recorded it (services.boundaries).
    trigger = models.CharField(
        max_length=10,
        choices=[
            ("auto", "Automatic"),
            ("manual", "Manual"),
            ("transcript", "From the transcript"),
            ("provider", "By the model's provider"),
        ],
        default="auto",
    )
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
            # The dashboard's "what failed": a few rows, not a probe of every session's newest compaction.
            models.Index(fields=["session"], name="compaction_failed", condition=Q(status="failed")),
            models.Index(fields=["project", "session"], name="compaction_project_failed", condition=Q(status="failed")),
            # The dashboard's compactions and savings per day.
            models.Index(fields=["project", "created_at"], name="compaction_project_created"),
            models.Index(
                fields=["project", "finished_at"], name="compaction_project_saved", condition=Q(status="succeeded")
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

    compaction = models.ForeignKey(Compaction, on_delete=models.CASCADE, related_name="backups", db_index=False)
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

    @classmethod
    def of(cls, compaction: Compaction, message: Message) -> MessageBackup:
        """An unsaved backup of ``message`` as it is now, for ``compaction``'s revert to restore."""
        return cls(
            compaction=compaction,
            message=message,
            content=message.content,
            tokens=message.tokens,
            tokens_exact=message.tokens_exact,
            state=message.state,
            previous_compaction_id=message.compaction_id,
        )


class Checkpoint(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="checkpoints", db_index=False)
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
        ordering = ["session_id", "-version"]
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
