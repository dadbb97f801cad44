"""REST for transcripts uploaded as they grow: ``POST /sessions/transcript/`` (the Claude Code hook)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import steps
from sessions_app.api.auth import AuthenticatedRequest
from sessions_app.api.parsers import CleaningJSONParser
from sessions_app.api.schema import error_response
from sessions_app.api.views import STATUS_SCHEMA, _valid
from sessions_app.models import Role
from sessions_app.selectors import access
from sessions_app.services import transcript_sync


class TranscriptIn(serializers.Serializer):
    project = serializers.CharField(max_length=200, help_text="Project id or name (one of yours)")
    external_id = serializers.CharField(
        max_length=150, help_text="The agent's own session id (Claude Code's session_id); the session is found or made"
    )
    format = serializers.ChoiceField(choices=list(transcript_sync.FORMATS), default="claude-code")
    offset = serializers.IntegerField(
        min_value=0, max_value=2**53, help_text="Byte offset in the transcript where `lines` starts"
    )
    lines = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        required=False,
        default="",
        help_text="Complete JSONL lines, each ending with a newline; empty to only flush or read the status",
    )
    final = serializers.BooleanField(
        default=False, help_text="The agent stopped (Stop, SessionEnd, PreCompact): store the last response too"
    )
    name = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="", help_text="Name of a session made now"
    )


class TranscriptOut(serializers.Serializer):
    session = serializers.IntegerField(help_text="The session holding the main conversation")
    continued_in = serializers.IntegerField(
        allow_null=True,
        help_text="Once that session was handed off into a fresh linked one (auto-continue): the session now "
        "taking the conversation's messages, whose STATUS `status` is; else null",
    )
    offset = serializers.IntegerField(help_text="Bytes of the transcript the server holds: the next upload's offset")
    received = serializers.IntegerField(help_text="Bytes of this upload that were new")
    messages = serializers.IntegerField(help_text="Messages stored by this upload (sub-agents' included)")
    held_back = serializers.IntegerField(
        help_text="Messages read but not final yet (a response that may still grow, user lines a request may merge)"
    )
    rejected = serializers.IntegerField(
        help_text="Lines or messages of this upload that could not be stored: skipped (the rest was stored) and "
        "recorded with their reasons in the session's warnings and in admin"
    )
    complete = serializers.BooleanField(
        help_text="False while the server receives again what it held before its copy was dropped"
    )
    sidechains = serializers.ListField(child=serializers.IntegerField(), help_text="Sub-agents' sessions")
    created = serializers.BooleanField(help_text="This upload made the session")
    status = STATUS_SCHEMA


class TranscriptOffsetOut(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.CharField(help_text="transcript_offset; also transcript_changed or session_closed")
    expected_offset = serializers.IntegerField(required=False, help_text="Send again from this byte offset")


class SessionTranscriptApi(APIView):
    parser_classes = [CleaningJSONParser]  # the lines are a recorded file: cleaned, never refused

    @extend_schema(
        request=TranscriptIn,
        responses={
            200: TranscriptOut,
            404: error_response("404"),
            409: OpenApiResponse(
                TranscriptOffsetOut,
                description="The upload doesn't start where the server's copy ends (resend from `expected_offset`), "
                "the transcript was rewritten, or the session is closed",
            ),
        },
        description=(
            "Upload the lines a transcript (Claude Code JSONL) gained since the last upload. The server re-reads "
            "everything received with the reader `ctx import` uses and appends the messages that became final, so "
            "the session ends up equal to a one-shot import of the file. Repeats are ignored; a gap is a 409."
        ),
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = _valid(TranscriptIn, request.data)
        project = access.project_find_for(request.user, data["project"], min_role=Role.MEMBER)
        try:
            result = steps.transcript_upload(
                user=request.user,
                project=project,
                external_id=data["external_id"],
                offset=data["offset"],
                lines=data["lines"],
                final=data["final"],
                name=data["name"],
                fmt=data["format"],
            )
        except transcript_sync.OffsetMismatch as exc:
            return Response(
                {"detail": exc.detail, "code": exc.code, "expected_offset": exc.expected_offset}, status=409
            )
        return Response(transcript_sync.sync_summary(result))
