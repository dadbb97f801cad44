"""Sessions and their messages, with the running totals STATUS reads and the tool-call index that
keeps every tool result answering a known call."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from sessions_app.models.projects import Project


class SessionStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    HANDED_OFF = "handed_off", "Handed off"
    ARCHIVED = "archived", "Archived"


# The metadata key naming the session a sub-agent's session belongs to (its id), as ``spawned_by``.
SIDECHAIN_OF = "sidechain_of"


class AgentSession(models.Model):
    # Indexes that lead with a foreign key make its own index redundant (db_index=False below).
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sessions", db_index=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    name = models.CharField(max_length=200, blank=True)
    external_id = models.CharField(max_length=200, blank=True, default="")
    model = models.CharField(max_length=100, default="claude-sonnet-4-5")
    context_window_override = models.PositiveIntegerField(null=True, blank=True)
    # The window the provider taught the session (its refusal of a request as too long named it), in
    # place of the model's; a later request it answered with more input than this raises it again
    # (services.proxy.messages). The session's own override, when set, wins over it.
    context_window_learnt = models.PositiveIntegerField(null=True, blank=True)
    system_prompt = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=12, choices=SessionStatus.choices, default=SessionStatus.ACTIVE)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="continuations")
    # The session whose agent started this one: a sub-agent's (a sidechain of a Claude Code transcript,
    # a subagent's requests through the proxy). Its metadata says the same (``SIDECHAIN_OF``).
    spawned_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="sub_agents", db_index=True
    )
    auto_compact = models.BooleanField(null=True, blank=True, help_text="Empty: the project policy decides.")
    metadata = models.JSONField(default=dict, blank=True)
    # What redaction replaced in what the session holds: kind -> secrets (never a value).
    redactions = models.JSONField(default=dict, blank=True)

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
    # That count came from the exact-count cache, not from a call to Anthropic (STATUS `cached`).
    exact_cached = models.BooleanField(default=False)
    exact_counted_at = models.DateTimeField(null=True, blank=True)
    # A recorded transcript's harness: what the model read at the session's first response its
    # transcript reports usage of, and ctxweb's raw estimate of what the session held then. The
    # difference is the agent's own system prompt and tools, which the transcript doesn't show
    # (selectors.usage adds it to the system prompt's part). None: not recorded from a transcript.
    harness_read_tokens = models.PositiveIntegerField(null=True, blank=True)
    harness_raw_tokens = models.PositiveIntegerField(null=True, blank=True)
    count_warning = models.CharField(max_length=500, blank=True)

    compaction_failures = models.PositiveIntegerField(default=0)
    auto_paused = models.BooleanField(default=False)
    # The session's level and how full it is, from the totals above, stored so that lists, the level
    # filter and the dashboard read them in SQL. Every change of totals, model, window or policy moves
    # them (services.webhook_events.session_level_record); a model profile's edit reaches the sessions
    # of that model through the relevel job. Empty/None: not worked out yet (sessions from before the
    # columns came); readers work those out from the totals.
    level = models.CharField(max_length=10, blank=True, default="")
    usage_percent = models.FloatField(null=True, blank=True)
    # Lines or messages of a recorded transcript that could not be stored (IngestRejection has each).
    rejected_count = models.PositiveIntegerField(default=0)
    rejected_reason = models.CharField(max_length=500, blank=True, help_text="Why the latest one was skipped.")
    # Requests the proxy forwarded without recording them (ctxweb's database was unreachable), and
    # when the first and the latest were: their messages come with the agent's next request, but not
    # their usage, nor the last ones if the conversation ended then.
    unrecorded_requests = models.PositiveIntegerField(default=0)
    unrecorded_from = models.DateTimeField(null=True, blank=True)
    unrecorded_to = models.DateTimeField(null=True, blank=True)

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
        indexes = [
            models.Index(fields=["project", "status", "-last_activity_at"], name="session_project_status"),
            # The level filter and the dashboard's counts and closest five, without a pass over the project.
            models.Index(fields=["project", "status", "level"], name="session_project_level"),
            # id last: the closest five (``ORDER BY usage_percent DESC, id``) are the index's first rows.
            models.Index(fields=["project", "status", "-usage_percent", "id"], name="session_project_usage"),
            # The dashboard's paused sessions: a few rows, not a pass over the project's sessions.
            models.Index(fields=["project"], name="session_paused", condition=Q(auto_paused=True, status="active")),
            # The few sessions without a stored level yet (``selectors.usage.unleveled``), not all of them.
            models.Index(
                fields=["project", "status"],
                name="session_unleveled",
                condition=Q(level="") | Q(usage_percent__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.external_id or f"session {self.pk}"


class MessageState(models.TextChoices):
    ACTIVE = "active", "Active"
    COMPACTED = "compacted", "Compacted"
    SUMMARIZED = "summarized", "Summarized"
    ARCHIVED = "archived", "Archived"


# The states whose messages a model sees: untouched, or shrunk by a reversible compaction.
CONTEXT_STATES = (MessageState.ACTIVE, MessageState.COMPACTED)

# Rows one bulk_update statement changes at most: its UPDATE … SET col = CASE WHEN id = … holds a branch
# per row, which Postgres tries in order for every row, so one statement over n rows costs n².
BULK_UPDATE_BATCH = 500


class Message(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="messages", db_index=False)
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10)
    content = models.JSONField()
    tokens = models.PositiveIntegerField(help_text="Raw offline estimate, framing included.")
    tokens_exact = models.PositiveIntegerField(null=True, blank=True)
    # NULL, not "": the partial unique constraint below must ignore messages sent without an id.
    client_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    state = models.CharField(max_length=12, choices=MessageState.choices, default=MessageState.ACTIVE)
    compaction = models.ForeignKey(
        "Compaction",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="changed_messages",
        db_index=False,  # most messages have none: a partial index below holds only those that do
    )
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # By the column: "session" would join AgentSession to every message query, for its ordering.
        ordering = ["session_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_seq_unique"),
            models.UniqueConstraint(
                fields=["session", "client_id"], condition=Q(client_id__isnull=False), name="message_client_id_unique"
            ),
        ]
        indexes = [
            models.Index(fields=["session", "state", "seq"], name="message_session_state_seq"),
            models.Index(fields=["compaction"], name="message_compaction", condition=Q(compaction__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.role}"


class ToolUse(models.Model):
    """Index of tool_use ids per session, so a tool_result can be checked against an earlier call
    without scanning message JSON (works the same on Postgres and SQLite)."""

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="tool_uses", db_index=False)
    tool_use_id = models.CharField(max_length=255)
    seq = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["session", "tool_use_id"], name="tooluse_session_id")]

    def __str__(self) -> str:
        return f"{self.tool_use_id} (session {self.session_id}, seq {self.seq})"


class IngestRejection(models.Model):
    """A line or message of a recorded transcript (sync or import) that was skipped because it could
    not be stored: the rest of the transcript went on. Shown in STATUS warnings and in admin."""

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="rejections", db_index=False)
    source = models.CharField(max_length=20, help_text="transcript (sync), import or proxy")
    position = models.CharField(max_length=200, help_text="Which line or message")
    code = models.CharField(max_length=50)
    detail = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["session", "-created_at"], name="rejection_session_created")]

    def __str__(self) -> str:
        return f"{self.position}: {self.code}"


class DailyIngest(models.Model):
    """Tokens received per project, day (the server's time zone) and model, added to by every append:
    the dashboard's per-day chart reads a few of these rows, where summing the messages themselves read
    every message of the period (2 s for a project at a million messages). As received: a later
    compaction or deletion does not take tokens back."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    model = models.CharField(max_length=200)
    tokens = models.BigIntegerField(default=0)  # raw counts, as stored on the messages (uncalibrated)
    messages = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "day", "model"], name="daily_ingest_unique")]

    def __str__(self) -> str:
        return f"{self.day} {self.model}: {self.tokens} tokens"


class TranscriptChunk(models.Model):
    """Bytes of a transcript uploaded line by line (``services.transcript_sync``), one row per upload
    that brought new bytes: together, from ``start`` 0 on, the text the session's cursor describes, so
    any process continues where another stopped."""

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="+", db_index=False)
    start = models.PositiveBigIntegerField(help_text="Byte offset of data in the transcript")
    data = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "start"], name="transcript_chunk_unique")]

    def __str__(self) -> str:
        return f"session {self.session_id}, bytes {self.start}+{len(self.data)}"
