"""ctxweb's data model: data and constraints only. Writes live in ``services/``, reads in
``selectors/`` (docs/ARCHITECTURE.md). One module per part of the model; every model is importable from
here, as Django expects of an app's ``models``."""

from sessions_app.models.archive import ArchiveEntry, ArchiveKind
from sessions_app.models.budgets import Budget, BudgetPeriod
from sessions_app.models.compactions import (
    ACTIVE_COMPACTION_STATUSES,
    FALLBACK_NOTE,
    STEP_UP_NOTE,
    Checkpoint,
    Compaction,
    CompactionStatus,
    HandoffDocument,
    MessageBackup,
)
from sessions_app.models.maintenance import BackfillCursor
from sessions_app.models.mcp import McpCall
from sessions_app.models.projects import ROLE_RANK, ApiKey, CompactionPolicy, Membership, ModelProfile, Project, Role
from sessions_app.models.requests import COST_UNITS, DailySpend, ProviderRequest, RequestSource, cost_from_units
from sessions_app.models.sessions import (
    BULK_UPDATE_BATCH,
    CONTEXT_STATES,
    SIDECHAIN_OF,
    AgentSession,
    DailyIngest,
    IngestRejection,
    Message,
    MessageState,
    SessionStatus,
    ToolUse,
    TranscriptChunk,
)
from sessions_app.models.webhooks import (
    TEST_EVENT,
    DeliveryStatus,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
    WebhookFormat,
)

__all__ = [
    "ACTIVE_COMPACTION_STATUSES",
    "BULK_UPDATE_BATCH",
    "CONTEXT_STATES",
    "COST_UNITS",
    "FALLBACK_NOTE",
    "ROLE_RANK",
    "SIDECHAIN_OF",
    "STEP_UP_NOTE",
    "TEST_EVENT",
    "AgentSession",
    "ApiKey",
    "ArchiveEntry",
    "ArchiveKind",
    "BackfillCursor",
    "Budget",
    "BudgetPeriod",
    "Checkpoint",
    "Compaction",
    "CompactionPolicy",
    "CompactionStatus",
    "DailyIngest",
    "DailySpend",
    "DeliveryStatus",
    "HandoffDocument",
    "IngestRejection",
    "McpCall",
    "Membership",
    "Message",
    "MessageBackup",
    "MessageState",
    "ModelProfile",
    "Project",
    "ProviderRequest",
    "RequestSource",
    "Role",
    "SessionStatus",
    "ToolUse",
    "TranscriptChunk",
    "Webhook",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEvent",
    "WebhookFormat",
    "cost_from_units",
]
