"""ctxweb's data model: data and constraints only. Writes live in ``services/``, reads in
``selectors/`` (docs/ARCHITECTURE.md). One module per part of the model; every model is importable from
here, as Django expects of an app's ``models``."""

from sessions_app.models.archive import ArchiveEntry, ArchiveKind
from sessions_app.models.compactions import (
    ACTIVE_COMPACTION_STATUSES,
    FALLBACK_NOTE,
    Checkpoint,
    Compaction,
    CompactionStatus,
    HandoffDocument,
    MessageBackup,
)
from sessions_app.models.projects import ROLE_RANK, ApiKey, CompactionPolicy, Membership, ModelProfile, Project, Role
from sessions_app.models.sessions import (
    CONTEXT_STATES,
    AgentSession,
    IngestRejection,
    Message,
    MessageState,
    SessionStatus,
    ToolUse,
)

__all__ = [
    "ACTIVE_COMPACTION_STATUSES",
    "CONTEXT_STATES",
    "FALLBACK_NOTE",
    "ROLE_RANK",
    "AgentSession",
    "ApiKey",
    "ArchiveEntry",
    "ArchiveKind",
    "Checkpoint",
    "Compaction",
    "CompactionPolicy",
    "CompactionStatus",
    "HandoffDocument",
    "IngestRejection",
    "Membership",
    "Message",
    "MessageBackup",
    "MessageState",
    "ModelProfile",
    "Project",
    "Role",
    "SessionStatus",
    "ToolUse",
]
