"""Agents' conversations as the proxy sees them: each a sequence of exchanges (the request the agent
sent, the model's answer to it), generated or read from the recorded Claude Code fixtures.

A generated conversation grows its history request by request: the user asks, the model thinks,
calls tools (several at once), reads their results (some failing, some as blocks) and answers. Each
request resends the history in a form of the moment, as Claude Code does: its cache marker on the
newest message, a text sent as a string once and as blocks the next time, a ``system`` message
somewhere, a billing line at the top of the system prompt, its session id inside a JSON
``metadata.user_id``. The agent may keep a reply in a form of its own (its tool calls renamed, the
results then naming those).
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any, Protocol

from hypothesis import strategies as st

from sessions_app.services.proxy.identity import continues_after_compaction, conversation_of
from sessions_app.services.proxy.messages import identity
from tests.clients.claude_code import load_fixtures
from tests.fakes.anthropic_server import default_count_tokens

CACHE = {"type": "ephemeral"}
REMINDER = "<system-reminder>\nAs you answer the user's questions, you can use this context.\n</system-reminder>"
MODEL = "claude-sonnet-4-5"
# How Claude Code's summary of a conversation it compacted opens the history that goes on from it.
SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. The summary "
    "below covers the earlier portion of the conversation."
)


@dataclass(frozen=True)
class Exchange:
    body: dict[str, Any]  # the request as the agent sent it
    answer: dict[str, Any]  # the model's message as its response carried it (id, content, usage)


Segment = tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]


@dataclass(frozen=True)
class Script:
    """A conversation before it takes a form, in segments: a segment's messages as the agent keeps
    them, and for each assistant message the model's reply it came from (index → content). A segment
    after the first starts from the summary the agent compacted the one before into (Claude Code's
    ``/compact``: its request for that summary is not recorded, and is left out here)."""

    segments: list[Segment]
    forms: int  # the seed of the forms each request takes

    def exchanges(self, session_id: str) -> list[Exchange]:
        """The requests (each the history before a reply) and their answers; ``session_id`` is the
        agent's, in each request's ``metadata.user_id``."""
        pick = random.Random(self.forms)
        found: list[Exchange] = []
        for messages, replies in self.segments:
            for at, content in sorted(replies.items()):
                body = in_some_form(messages[:at], pick, session_id)
                found.append(Exchange(body, answer_of(f"msg_{session_id[:8]}_{len(found)}", content, body)))
        return found

    def starts(self) -> list[int]:
        """The first exchange of each segment."""
        firsts, n = [], 0
        for _, replies in self.segments:
            firsts.append(n)
            n += len(replies)
        return firsts


class Draws(Protocol):
    """Where a conversation's choices come from: Hypothesis (it shrinks them) or a seeded random."""

    def integer(self, low: int, high: int) -> int: ...
    def boolean(self) -> bool: ...
    def words(self) -> str: ...
    def permutation(self, items: list[str]) -> list[str]: ...


_WORDS = "abcdefghij klmn\n"


@dataclass(frozen=True)
class _Drawn:
    draw: Any

    def integer(self, low: int, high: int) -> int:
        return int(self.draw(st.integers(low, high)))

    def boolean(self) -> bool:
        return bool(self.draw(st.booleans()))

    def words(self) -> str:
        return str(self.draw(st.text(alphabet=_WORDS, min_size=1, max_size=24).filter(lambda t: t.strip())))

    def permutation(self, items: list[str]) -> list[str]:
        return list(self.draw(st.permutations(items)))


@dataclass(frozen=True)
class _Seeded:
    pick: random.Random

    def integer(self, low: int, high: int) -> int:
        return self.pick.randint(low, high)

    def boolean(self) -> bool:
        return self.pick.random() < 0.5

    def words(self) -> str:
        return "w" + "".join(self.pick.choice(_WORDS) for _ in range(self.pick.randint(0, 60)))

    def permutation(self, items: list[str]) -> list[str]:
        return self.pick.sample(items, len(items))


@st.composite
def scripts(draw: Any, *, compactions: bool = True) -> Script:
    return script(_Drawn(draw), turns=3, rounds=2, compactions=compactions)


def seeded_script(seed: int, *, turns: int = 4, rounds: int = 3) -> Script:
    return script(_Seeded(random.Random(seed)), turns=turns, rounds=rounds, compactions=False)


def script(draws: Draws, *, turns: int, rounds: int, compactions: bool) -> Script:
    """1 to ``turns`` things the user asks; for each, up to ``rounds`` rounds of parallel tool calls
    (1–3), then an answer. ``compactions``: before a turn after the first, the agent may compact the
    conversation (the turn then starts from the summary)."""
    segments: list[Segment] = []
    messages: list[dict[str, Any]] = []
    replies: dict[int, list[dict[str, Any]]] = {}
    calls = 0
    for turn in range(draws.integer(1, turns)):
        asked: Any = f"turn {turn}: {draws.words()}"
        if turn == 0:
            asked = [{"type": "text", "text": REMINDER}, {"type": "text", "text": asked}]
        elif compactions and draws.integer(0, 2) == 0:
            segments.append((messages, replies))
            messages, replies = [], {}
            asked = f"{SUMMARY}\n\nThe user asked {len(segments)} things so far. {asked}"
        messages.append({"role": "user", "content": asked})
        for _ in range(draws.integer(0, rounds)):
            ids = [f"toolu_{calls + n:04d}" for n in range(draws.integer(1, 3))]
            calls += len(ids)
            reply = [*_thought(draws), *_said(draws)]
            reply += [{"type": "tool_use", "id": i, "name": "Bash", "input": {"command": draws.words()}} for i in ids]
            replies[len(messages)] = reply
            kept = ids
            if draws.boolean():  # the agent gives the calls ids of its own
                kept = [f"agent_{i}" for i in ids]
                reply = [{**b, "id": f"agent_{b['id']}"} if b["type"] == "tool_use" else b for b in reply]
            messages.append({"role": "assistant", "content": reply})
            results: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": i, "content": _output(draws), "is_error": draws.boolean()}
                for i in draws.permutation(kept)
            ]
            if draws.boolean():
                results.append({"type": "text", "text": "Tool loaded."})
            messages.append({"role": "user", "content": results})
        reply = [*_thought(draws), {"type": "text", "text": draws.words()}]
        replies[len(messages)] = reply
        messages.append({"role": "assistant", "content": reply})
    return Script([*segments, (messages, replies)], draws.integer(0, 2**32))


def _thought(draws: Draws) -> list[dict[str, Any]]:
    if not draws.boolean():
        return []
    thought = draws.words()
    return [{"type": "thinking", "thinking": thought, "signature": hashlib.sha256(thought.encode()).hexdigest()}]


def _said(draws: Draws) -> list[dict[str, Any]]:
    return [{"type": "text", "text": draws.words()}] if draws.boolean() else []


def _output(draws: Draws) -> Any:
    text = draws.words()
    return text if draws.boolean() else [{"type": "text", "text": text}]


def answer_of(message_id: str, content: list[dict[str, Any]], body: dict[str, Any]) -> dict[str, Any]:
    """The model's message as the API answers it, with the usage the fake API would count."""
    calls = any(b.get("type") == "tool_use" for b in content)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": copy.deepcopy(content),
        "stop_reason": "tool_use" if calls else "end_turn",
        "usage": {"input_tokens": default_count_tokens(body), "output_tokens": 9},
    }


def in_some_form(history: list[dict[str, Any]], pick: random.Random, session_id: str) -> dict[str, Any]:
    """The request as Claude Code might send it (see the module's docstring)."""
    messages = [{"role": m["role"], "content": _form(m["content"], pick)} for m in copy.deepcopy(history)]
    newest = messages[-1]
    if isinstance(newest["content"], str):
        newest["content"] = [{"type": "text", "text": newest["content"]}]
    newest["content"][-1] = {**newest["content"][-1], "cache_control": CACHE}
    if pick.random() < 0.3:
        messages.insert(pick.randrange(1, len(messages) + 1), {"role": "system", "content": "The date changed."})
    system = [
        {
            "type": "text",
            "text": f"x-anthropic-billing-header: cc_version=2.1.328.{pick.randrange(99)}; cc_entrypoint=cli",
        },
        {"type": "text", "text": "You are Claude Code.", "cache_control": CACHE},
    ]
    user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": session_id})
    return {
        "model": MODEL,
        "max_tokens": 32000,
        "system": system,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "metadata": {"user_id": user_id},
        "messages": messages,
    }


def _form(content: Any, pick: random.Random) -> Any:
    """A text as a string or as one block; anything else as it is."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if pick.random() < 0.5 else content
    if len(content) == 1 and content[0].get("type") == "text" and pick.random() < 0.5:
        return content[0]["text"]
    return content


def recorded_messages(body: dict[str, Any]) -> list[Any]:
    """The messages the proxy records of a request (these conversations never ask for a summary)."""
    kept = conversation_of(body)
    assert kept is not None
    return list(kept["messages"])


def held(exchanges: list[Exchange]) -> list[tuple[str, Any]]:
    """What a session holding the conversation holds, as its messages say it (roles and
    ``identity``): for each segment (a client's compaction starts one), its last request's history as
    recorded and the answer to it."""
    said: list[tuple[str, Any]] = []
    for n, exchange in enumerate(exchanges):
        later = exchanges[n + 1] if n + 1 < len(exchanges) else None
        if later is not None and not _starts_a_segment(later, exchange):
            continue
        messages = (conversation_of(exchange.body) or {})["messages"]
        said += [(m["role"], identity(m["content"])) for m in messages]
        said.append(("assistant", identity(exchange.answer["content"])))
    return said


def _starts_a_segment(exchange: Exchange, before: Exchange) -> bool:
    first, then = ((conversation_of(e.body) or {})["messages"][0] for e in (exchange, before))
    return continues_after_compaction([first]) and identity(first["content"]) != identity(then["content"])


def claude_code(session_id: str) -> list[Exchange]:
    """The recorded Claude Code run (tests/fixtures/clients): each request, answered with the reply
    the next request holds (the last, with a closing text), under the session id given."""
    bodies = [fixture["body"] for fixture in load_fixtures() if fixture["path"].endswith("/v1/messages")]
    found = []
    for n, body in enumerate(bodies):
        raw = json.dumps(body).replace("00000000-0000-4000-8000-000000000000", session_id)
        body = json.loads(raw)
        later = bodies[n + 1]["messages"] if n + 1 < len(bodies) else []
        reply = later[len(body["messages"])]["content"] if later else [{"type": "text", "text": "Done."}]
        found.append(Exchange(body, answer_of(f"msg_{session_id[:8]}_{n}", reply, body)))
    return found
