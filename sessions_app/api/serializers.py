"""Input parsing and output shaping. No rules here: those live in services and selectors."""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin, get_type_hints, is_typeddict

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from compaction.status import Status
from compaction.tokens import calibrate
from compaction.transcripts import FORMATS as TRANSCRIPT_FORMATS
from compaction.types import Level, level_choices
from sessions_app.models import (
    AgentSession,
    Checkpoint,
    Compaction,
    HandoffDocument,
    Message,
    Project,
    SessionStatus,
)
from sessions_app.selectors.compactions import COMPACTION_FIELDS
from sessions_app.services.projects import PROJECT_DESCRIPTION_MAX, PROJECT_NAME_MAX


class ProjectOut(serializers.ModelSerializer):
    role = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = ["id", "name", "description", "created_at", "role"]

    def get_role(self, project: Project) -> str | None:
        roles = self.context.get("roles", {})
        return roles.get(project.pk)


class ProjectIn(serializers.Serializer):
    name = serializers.CharField(max_length=PROJECT_NAME_MAX)
    description = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=PROJECT_DESCRIPTION_MAX
    )


class SessionOut(serializers.ModelSerializer):
    context_window = serializers.IntegerField(source="context_window_override", allow_null=True)
    # Ignored: a field named like an attribute of Field (its ``parent`` serializer; also SessionIn.parent and
    # CountTokensOut.source). The stubs see one attribute, but DRF's metaclass takes declared fields off the
    # class (into ``_declared_fields``), so the two never meet.
    parent: serializers.PrimaryKeyRelatedField[AgentSession]  # type: ignore[assignment]
    parent = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    spawned_by: serializers.PrimaryKeyRelatedField[AgentSession] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="A sub-agent's session: the session whose agent started it"
    )
    redactions = serializers.DictField(
        child=serializers.IntegerField(),
        read_only=True,
        help_text="Secrets replaced in what the session holds, by kind (never a value): see docs/REDACTION.md",
    )

    class Meta:
        model = AgentSession
        fields = [
            "id",
            "project",
            "name",
            "external_id",
            "model",
            "context_window",
            "system_prompt",
            "tools",
            "status",
            "parent",
            "spawned_by",
            "auto_compact",
            "metadata",
            "redactions",
            "last_seq",
            "message_count",
            "active_message_count",
            "created_at",
            "updated_at",
            "last_activity_at",
        ]


class SessionListOut(SessionOut):
    """The list view leaves out the (possibly large) system prompt, tool schemas and metadata."""

    sub_agents = serializers.IntegerField(
        source="sub_agent_count", read_only=True, help_text="How many sub-agents' sessions this session's agent started"
    )

    class Meta(SessionOut.Meta):
        fields = [
            *(f for f in SessionOut.Meta.fields if f not in {"system_prompt", "tools", "metadata", "updated_at"}),
            "sub_agents",
        ]


class SessionIn(serializers.Serializer):
    project = serializers.IntegerField()
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    model = serializers.CharField(max_length=100, required=False, default="claude-sonnet-4-5")
    system_prompt = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)
    # Ignored: the stubs allow only a mapping as a JSONField's default; DRF takes any JSON value.
    tools = serializers.JSONField(required=False, default=list)  # type: ignore[arg-type]
    external_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    context_window = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1024, max_value=100_000_000
    )
    auto_compact = serializers.BooleanField(required=False, allow_null=True, default=None)
    parent = serializers.IntegerField(required=False, allow_null=True, default=None)  # type: ignore[assignment]


class SessionImportIn(serializers.Serializer):
    file = serializers.FileField(allow_empty_file=False)
    format = serializers.ChoiceField(choices=list(TRANSCRIPT_FORMATS))
    project = serializers.CharField(max_length=200, help_text="Project id or name (one of yours)")
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    model = serializers.CharField(max_length=100, required=False, allow_null=True, default=None)
    context_window = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1024, max_value=100_000_000
    )
    auto_compact = serializers.BooleanField(required=False, allow_null=True, default=None)
    episode = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        help_text="Which conversation of a file that holds several (tau-bench)",
    )


class SessionPatchIn(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    model = serializers.CharField(max_length=100, required=False)
    system_prompt = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    tools = serializers.JSONField(required=False)
    context_window = serializers.IntegerField(required=False, allow_null=True, min_value=1024, max_value=100_000_000)
    auto_compact = serializers.BooleanField(required=False, allow_null=True)
    status = serializers.ChoiceField(choices=SessionStatus.choices, required=False)


class MessageOut(serializers.ModelSerializer):
    tokens = serializers.SerializerMethodField()
    compaction: serializers.PrimaryKeyRelatedField[Compaction] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True
    )

    class Meta:
        model = Message
        fields = [
            "id",
            "seq",
            "role",
            "content",
            "tokens",
            "tokens_exact",
            "client_id",
            "state",
            "compaction",
            "metadata",
            "created_at",
        ]

    def get_tokens(self, message: Message) -> int:
        return calibrate(message.tokens, self.context.get("calibration", 1.0))


class AppendedMessageOut(MessageOut):
    mismatch = serializers.SerializerMethodField(
        help_text="This client_id was already stored with another role or content: the stored message is answered "
        "and nothing was changed"
    )

    class Meta(MessageOut.Meta):
        fields = [*MessageOut.Meta.fields, "mismatch"]

    def get_mismatch(self, message: Message) -> bool:
        return message.client_id in self.context.get("mismatched", ())


class MessageIn(serializers.Serializer):
    """Documents one message of the body (the body is one of these or a list of them)."""

    role = serializers.ChoiceField(choices=["user", "assistant", "tool", "system"])
    content = serializers.JSONField(
        help_text="A string or a list of content blocks (text, tool_use, tool_result, image)."
    )
    client_id = serializers.CharField(
        required=False, max_length=200, help_text="Idempotency key: a retry stores nothing twice."
    )
    created_at = serializers.DateTimeField(required=False)
    metadata = serializers.JSONField(required=False)


class CountTokensIn(serializers.Serializer):
    model = serializers.CharField(max_length=100)
    system = serializers.JSONField(required=False)
    tools = serializers.JSONField(required=False)
    messages = serializers.JSONField()


class CountTokensOut(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    source = serializers.ChoiceField(choices=["exact", "estimate"])  # type: ignore[assignment]  # as SessionOut.parent
    cached = serializers.BooleanField(help_text="An exact count served from ctxweb's exact-count cache")


class PriceTierOut(serializers.Serializer):
    above = serializers.IntegerField(help_text="From this many input tokens in a request on (cache included)")
    input = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    cache_write = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    cache_read = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    output = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)


class PricesOut(serializers.Serializer):
    """US dollars per million tokens of each kind; null: no price of its own (a cache read or write
    then costs the input price)."""

    input = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    cache_write = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    cache_read = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    output = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    tiers = PriceTierOut(many=True, help_text="Long-context prices: every token of a longer request at these")


class ModelOut(serializers.Serializer):
    name = serializers.CharField()
    provider = serializers.CharField()
    context_window = serializers.IntegerField(
        help_text="The input window (an input cap smaller than the window counted)"
    )
    max_output_tokens = serializers.IntegerField()
    calibration_factor = serializers.FloatField()
    long_context_window = serializers.IntegerField(
        allow_null=True, help_text="The window with `[1m]` or Anthropic's context-1m beta, when larger"
    )
    prices = PricesOut(allow_null=True)


class CompactionItemOut(serializers.Serializer):
    """One entry of a compaction's ``items``: what a strategy did to one message (``seq``), or to
    none (``seq`` null: the checkpoint a summary wrote, the handoff document it left)."""

    strategy = serializers.CharField()
    seq = serializers.IntegerField(allow_null=True)
    tokens_before = serializers.IntegerField()
    tokens_after = serializers.IntegerField()
    handoff = serializers.IntegerField(required=False, help_text="The handoff document's id (strategy handoff)")


@extend_schema_field(CompactionItemOut(many=True))
class CompactionItemsField(serializers.JSONField):
    """Stored as JSON and answered as stored; documented item by item."""


class CompactionOut(serializers.ModelSerializer):
    session: serializers.PrimaryKeyRelatedField[AgentSession] = serializers.PrimaryKeyRelatedField(read_only=True)
    saved_tokens = serializers.IntegerField(read_only=True, allow_null=True)
    items = CompactionItemsField(read_only=True)

    class Meta:
        model = Compaction
        fields = list(COMPACTION_FIELDS)


class CompactionIn(serializers.Serializer):
    level = serializers.ChoiceField(choices=level_choices(), default=Level.COMPACT.value)
    dry_run = serializers.BooleanField(default=False)
    instructions = serializers.CharField(required=False, allow_blank=True, default="", max_length=4000)


class StrategyTotalsOut(serializers.Serializer):
    messages = serializers.IntegerField()
    tokens_before = serializers.IntegerField()
    tokens_after = serializers.IntegerField()


class CompactionPreviewOut(serializers.Serializer):
    """The dry run's answer: what the compaction would do, written nowhere."""

    dry_run = serializers.BooleanField()
    session = serializers.IntegerField()
    level = serializers.ChoiceField(choices=level_choices())
    upto_seq = serializers.IntegerField()
    tokens_before = serializers.IntegerField()
    tokens_after = serializers.IntegerField()
    saved_tokens = serializers.IntegerField()
    would_skip = serializers.BooleanField(help_text="Saves less than the policy's minimum: a real run would skip")
    strategies = serializers.DictField(child=StrategyTotalsOut())
    items = CompactionItemOut(many=True)
    notes = serializers.ListField(child=serializers.CharField())
    checkpoint = serializers.JSONField(allow_null=True, help_text="The checkpoint a summary would write")


class CheckpointOut(serializers.ModelSerializer):
    session: serializers.PrimaryKeyRelatedField[AgentSession] = serializers.PrimaryKeyRelatedField(read_only=True)
    compaction: serializers.PrimaryKeyRelatedField[Compaction] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True
    )

    class Meta:
        model = Checkpoint
        fields = [
            "id",
            "session",
            "version",
            "reason",
            "data",
            "compaction",
            "upto_seq",
            "tokens",
            "lossy",
            "reverted",
            "created_at",
        ]


class HandoffIn(serializers.Serializer):
    def get_fields(self) -> dict[str, serializers.Field]:
        # ``continue`` is a Python keyword, so the field can't be a class attribute.
        return {"continue": serializers.BooleanField(default=False, help_text="Also start the continuation session")}


class HandoffOut(serializers.ModelSerializer):
    session: serializers.PrimaryKeyRelatedField[AgentSession] = serializers.PrimaryKeyRelatedField(read_only=True)
    checkpoint: serializers.PrimaryKeyRelatedField[Checkpoint] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True
    )
    continuation: serializers.PrimaryKeyRelatedField[AgentSession] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True
    )
    downloads = serializers.SerializerMethodField()

    class Meta:
        model = HandoffDocument
        fields = ["id", "session", "checkpoint", "continuation", "text", "markdown", "data", "created_at", "downloads"]

    def get_downloads(self, handoff: HandoffDocument) -> dict[str, str]:
        base = f"/api/v1/handoffs/{handoff.pk}/download/"
        return {fmt: f"{base}?format={fmt}" for fmt in ("txt", "md", "json")}


class ModelListOut(serializers.Serializer):
    results = ModelOut(many=True)
    fallback_context_window = serializers.IntegerField(help_text="The window of a model not listed here")
    data_package = serializers.CharField(help_text="The data package and version the windows and prices come from")


class ErrorOut(serializers.Serializer):
    """Every API error: a 4xx status with this body."""

    detail = serializers.CharField(help_text="What went wrong, for people")
    code = serializers.CharField(help_text="What went wrong, for programs (e.g. not_found, invalid_state)")
    field = serializers.CharField(required=False, help_text="The input field at fault, when there is one")
    # Ignored: DRF's metaclass takes declared fields off the class, so it never meets Serializer.errors
    # (as SessionOut.parent).
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Every field at fault and what is wrong with it, when the input is checked as a whole "
        "(a policy); `field` is the first of them",
    )


# ----------------------------------------------------------------------------- STATUS

_SCALARS: dict[Any, type[serializers.Field]] = {
    int: serializers.IntegerField,
    float: serializers.FloatField,
    str: serializers.CharField,
    bool: serializers.BooleanField,
}


def _field_for(hint: Any, name: str) -> serializers.Field:
    """The DRF field that documents one key of a TypedDict."""
    if hint in _SCALARS:
        return _SCALARS[hint]()
    args = get_args(hint)
    if type(None) in args and len(args) == 2:  # Optional[X]: X's field, null allowed
        inner = next(a for a in args if a is not type(None))
        return _SCALARS[inner](allow_null=True)
    if get_origin(hint) is Literal:
        return serializers.ChoiceField(choices=list(get_args(hint)))
    if get_origin(hint) is list:
        return serializers.ListField(child=_field_for(get_args(hint)[0], name))
    if is_typeddict(hint):
        return typed_dict_serializer(hint.__name__, hint)
    raise TypeError(f"{name}: no serializer field for {hint!r}")


def typed_dict_serializer(name: str, shape: Any) -> serializers.Serializer:
    """An inline serializer documenting a TypedDict key by key: the OpenAPI schema follows the type."""
    return inline_serializer(name, {key: _field_for(hint, key) for key, hint in get_type_hints(shape).items()})


# STATUS as the API documents it: built from the one definition the selector returns and ctxclient reads.
def status_schema() -> serializers.Serializer:
    return typed_dict_serializer("Status", Status)
