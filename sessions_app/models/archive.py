"""The pruner's log (docs/OPERATIONS.md, "The pruner")."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from sessions_app.models.projects import Project
from sessions_app.models.sessions import AgentSession


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
