"""What agents asked ctxweb's MCP tools for in a session (docs/SEARCH.md, "The agent asks"): the
tool, what it named (a recall id, a search), whether it was found; never the text it returned."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from sessions_app.models.projects import ApiKey
from sessions_app.models.sessions import AgentSession


class McpCall(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="mcp_calls", db_index=False)
    tool = models.CharField(max_length=20, help_text="context_status, search, recall or handoff.")
    asked = models.CharField(max_length=200, blank=True, help_text="The recall id, or the search (redacted).")
    found = models.BooleanField(default=True)
    chars = models.PositiveIntegerField(default=0, help_text="Characters answered.")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "MCP call"
        indexes = [models.Index(fields=["session", "-created_at"], name="mcpcall_session_created")]

    def __str__(self) -> str:
        return f"{self.tool} {self.asked} (session {self.session_id})"
