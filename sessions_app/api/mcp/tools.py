"""The tools an agent calls (each answers text; ``context_status`` and ``search`` the same as
structured content too — a client that has it reads only that, as Claude Code does, so ``recall`` and
``handoff``, whose text is the answer, have none): ``context_status`` (its session's STATUS), ``search`` (its session or
project), ``recall`` (the original behind a placeholder's ``m<seq>``, a checkpoint ``c<version>``, a
handoff ``h<id>``) and ``handoff`` (write the document, answer it). Each call is recorded in the
session (``McpCall``); an error the agent can act on is a tool result marked ``is_error``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp.types as types
from asgiref.sync import sync_to_async
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from compaction.search_text import plain_snippet
from compaction.usage import render_bar
from sessions_app import steps
from sessions_app.errors import ServiceError
from sessions_app.models import Role
from sessions_app.selectors import recall as recalling
from sessions_app.selectors import usage
from sessions_app.selectors.search import Scope, search
from sessions_app.services import mcp_calls

SEARCH_LIMIT = 20
_SESSION = {"type": "string", "description": "A session's id, or the agent's own session id; default: yours."}


@dataclass(frozen=True)
class Answer:
    text: str
    data: dict[str, Any] | None
    asked: str = ""
    found: bool = True


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": {**properties, "session": _SESSION}, "required": list(required)}


def _context_status(caller: dict[str, Any], args: dict[str, Any]) -> tuple[Any, Answer]:
    session = recalling.agent_session(caller["user"], caller["key"], _session_ref(caller, args))
    status = usage.session_status(session)
    lines = [
        f"Session {session.pk} ({session.name or 'unnamed'}), {session.model}:",
        render_bar(usage.session_usage(session)),
        status["recommendation"],
        *(f"Warning: {w}" for w in status["warnings"]),
    ]
    text = "\n".join(lines)
    return session, Answer(text, {"session": session.pk, "text": text, **status})


def _search(caller: dict[str, Any], args: dict[str, Any]) -> tuple[Any, Answer]:
    session = recalling.agent_session(caller["user"], caller["key"], _session_ref(caller, args))
    query = str(args.get("query") or "")
    whole_project = args.get("scope") == "project"
    limit = max(1, min(int(args.get("limit") or 10), SEARCH_LIMIT))
    scope = Scope(user=caller["user"], project=session.project_id, session=None if whole_project else session.pk)
    hits = search(scope, query, limit=limit)
    lines = [
        f"{h.ref}{'' if h.session_id == session.pk else f' (session {h.session_id})'} [{h.kind}"
        f"{', ' + h.state if h.state else ''}]: {plain_snippet(h.snippet)}"
        for h in hits
    ]
    text = "\n".join(lines) or f"Nothing found for {query!r}."
    if hits:
        text += "\n\nrecall <ref> (with session for another session's) answers the whole text."
    rows = [
        {"ref": h.ref, "session": h.session_id, "kind": h.kind, "state": h.state, "rank": h.rank,
         "snippet": plain_snippet(h.snippet)}
        for h in hits
    ]  # fmt: skip
    return session, Answer(text, {"hits": rows}, asked=query, found=bool(hits))


def _recall(caller: dict[str, Any], args: dict[str, Any]) -> tuple[Any, Answer]:
    session = recalling.agent_session(caller["user"], caller["key"], _session_ref(caller, args))
    ref = str(args.get("id") or "")
    found = recalling.recall(session, ref, offset=int(args.get("offset") or 0))
    more = (
        f"\n\n[{found.total - found.next_offset:,} more characters: recall {found.ref} offset {found.next_offset}]"
        if found.next_offset is not None
        else ""
    )
    return session, Answer(f"{found.what}\n\n{found.text}{more}", None, asked=found.ref)


def _handoff(caller: dict[str, Any], args: dict[str, Any]) -> tuple[Any, Answer]:
    session = recalling.agent_session(caller["user"], caller["key"], _session_ref(caller, args), min_role=Role.MEMBER)
    document = steps.handoff_create(session=session, user=caller["user"], continue_=False)  # with its webhooks
    text = f"h{document.pk}: the handoff document of session {session.pk}\n\n{document.markdown or document.text}"
    return session, Answer(text, None)


def _session_ref(caller: dict[str, Any], args: dict[str, Any]) -> str | None:
    ref = args.get("session") or caller.get("session")
    return str(ref) if ref not in (None, "") else None


Handler = Callable[[dict[str, Any], dict[str, Any]], tuple[Any, Answer]]
TOOLS: dict[str, tuple[types.Tool, Handler]] = {
    "context_status": (
        types.Tool(
            name="context_status",
            description="How full your context window is (ctxweb's STATUS of your session): what takes it, "
            "what ctxweb recommends, warnings.",
            input_schema=_schema({}),
        ),
        _context_status,
    ),
    "search": (
        types.Tool(
            name="search",
            description="Search everything your session (or, scope=project, your project's sessions) ever held, "
            'including what compaction cleared or summarized: words, "a phrase", or, -word. Answers recall ids.',
            input_schema=_schema(
                {
                    "query": {"type": "string"},
                    "scope": {"type": "string", "enum": ["session", "project"], "default": "session"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT, "default": 10},
                },
                ("query",),
            ),
        ),
        _search,
    ),
    "recall": (
        types.Tool(
            name="recall",
            description="The original text behind a recall id: m<seq> (a message as first stored, what a "
            "placeholder '[ctxweb: … recall m<seq> …]' replaced), c<version> (a checkpoint), h<id> (a handoff).",
            input_schema=_schema(
                {"id": {"type": "string"}, "offset": {"type": "integer", "minimum": 0, "default": 0}}, ("id",)
            ),
        ),
        _recall,
    ),
    "handoff": (
        types.Tool(
            name="handoff",
            description="Write your session's handoff document (what a fresh session starts from) and answer it.",
            input_schema=_schema({}),
        ),
        _handoff,
    ),
}


def _call(name: str, caller: dict[str, Any], args: dict[str, Any]) -> types.CallToolResult:
    """A tool's answer, recorded in the session; runs on the request's thread (the ORM's)."""
    handler = TOOLS[name][1]
    try:
        session, answer = handler(caller, args)
    except (ServiceError, ValueError, TypeError) as exc:
        return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
    mcp_calls.mcp_call_record(
        session=session,
        tool=name,
        asked=answer.asked,
        found=answer.found,
        chars=len(answer.text),
        user=caller["user"],
        api_key=caller["key"],
    )
    data = json.loads(json.dumps(answer.data, default=str)) if answer.data is not None else None
    return types.CallToolResult(content=[types.TextContent(text=answer.text)], structured_content=data)


async def _list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[tool for tool, _ in TOOLS.values()])


async def _call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name not in TOOLS:
        raise MCPError(code=types.INVALID_PARAMS, message=f"No tool {params.name!r}: {', '.join(TOOLS)}.")
    caller = ctx.request.scope["ctxweb.caller"]  # type: ignore[union-attr]  # the HTTP transport's request
    return await sync_to_async(_call)(params.name, caller, dict(params.arguments or {}))


SERVER = Server(
    "ctxweb",
    version="1",
    instructions="ctxweb keeps everything your session held, including what compaction cleared: "
    "search it, recall the original behind a placeholder's m<seq>, check your context, write a handoff.",
    on_list_tools=_list_tools,
    on_call_tool=_call_tool,
)
