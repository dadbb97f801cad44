"""Twenty agents at once through the real proxy (issue 28): gunicorn with two workers (gthread), two
recorder threads each, on Postgres, in front of the fake Anthropic API. Each agent holds a generated
conversation (parallel tool calls and their results, thinking, a cache marker on the newest message,
text as a string or as blocks, tool calls it renames) and sends its requests one after another, each
on a connection of its own, so both processes record a conversation's exchanges, in whatever order
their recorder threads get to them. Each conversation must be one session equal to it: 0 split, 0
duplicated, no note, no rejection."""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any

import psycopg
import pytest

from bench._server import Client, gunicorn_on_postgres, make_key
from sessions_app.services.proxy.messages import identity
from tests.fakes.anthropic_server import FakeAnthropic
from tests.proxy.agent_conversations import Exchange, held, recorded_messages, seeded_script

pytestmark = [pytest.mark.services, pytest.mark.slow]

AGENTS = 20
NOTE = "[ctxweb: this message could not be stored"


def scripted(conversations: Mapping[str, list[Exchange]], body: Mapping[str, Any]) -> dict[str, Any]:
    """The fake model's answer: the reply the conversation's script has for a history this long."""
    user_id = json.loads(body["metadata"]["user_id"])
    exchanges = conversations[user_id["session_id"]]
    sent = len(body["messages"])  # (the agent sends no system messages here: the fake API refuses them)
    exchange = next(e for e in exchanges if len(recorded_messages(e.body)) == sent)
    return {"content": exchange.answer["content"], "stop_reason": exchange.answer["stop_reason"]}


def agent(hostport: str, key: str, exchanges: list[Exchange], streamed: bool, failures: list[str]) -> None:
    """The conversation's requests in turn, each on a new connection (either web process may take it)."""
    host, port = hostport.split(":")
    headers = {"x-api-key": "sk-upstream", "anthropic-version": "2023-06-01", "content-type": "application/json",
               "ctxweb-api-key": key}  # fmt: skip
    for n, exchange in enumerate(exchanges):
        body = {**exchange.body, "stream": streamed}
        body["messages"] = [m for m in body["messages"] if m["role"] != "system"]  # the fake API refuses them
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            conn.request("POST", "/proxy/anthropic/v1/messages", json.dumps(body), headers)
            response = conn.getresponse()
            answer = response.read()
            if response.status != 200:
                failures.append(f"request {n}: {response.status} {answer[:300]!r}")
        finally:
            conn.close()
        streamed = not streamed


Stored = dict[str, list[tuple[str, list[tuple[str, Any]], int]]]


def stored(database_url: str, project: str) -> tuple[Stored, int]:
    """Each agent's sessions in the project (external id, messages: role and what it says, notes), and
    the rejections recorded."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT s.id, s.external_id, m.role, m.content FROM sessions_app_agentsession s"
            " JOIN sessions_app_project p ON p.id = s.project_id"
            " LEFT JOIN sessions_app_message m ON m.session_id = s.id"
            " WHERE p.name = %s ORDER BY s.id, m.seq",
            (project,),
        ).fetchall()
        rejections = conn.execute("SELECT count(*) FROM sessions_app_ingestrejection").fetchone() or (0,)
    sessions: dict[int, tuple[str, list[tuple[str, Any]]]] = {}
    for pk, external_id, role, content in rows:
        sessions.setdefault(pk, (external_id, []))
        if role is not None:
            sessions[pk][1].append((role, content))
    found: Stored = {}
    for external_id, messages in sessions.values():
        notes = sum(NOTE in json.dumps(content) for _, content in messages)
        said = [(role, identity(content)) for role, content in messages]
        agent = external_id.split("#")[0].split("@")[0]  # a side conversation's key, a retired one's: the agent's
        found.setdefault(agent, []).append((external_id, said, notes))
    return found, rejections[0]


def settled(database_url: str, project: str, expected: Mapping[str, int], seconds: float = 240) -> tuple[Stored, int]:
    """What the project holds once the recorder threads are done: every agent's messages there (at least
    as many as its conversation holds) and no change for two seconds, or the deadline. (A quiet spell
    alone is no sign: on a loaded machine one recording, with its in-process compaction, can take
    longer than that.)"""
    deadline = time.monotonic() + seconds
    last = stored(database_url, project)
    while time.monotonic() < deadline:
        time.sleep(2)
        now = stored(database_url, project)
        counts = {agent: sum(len(said) for _, said, _ in sessions) for agent, sessions in now[0].items()}
        if now == last and all(counts.get(agent, 0) >= n for agent, n in expected.items()):
            return now
        last = now
    return last


def test_twenty_conversations_at_once_are_twenty_sessions_each_equal_to_its_conversation(capsys):
    database_url = os.environ["DATABASE_URL"]
    pg, database = database_url.rsplit("/", 1)
    conversations = {str(uuid.uuid4()): seeded_script(n) for n in range(AGENTS)}
    exchanges = {sid: script.exchanges(sid) for sid, script in conversations.items()}
    failures: list[str] = []
    with FakeAnthropic() as upstream:
        upstream.set_message_function(partial(scripted, exchanges))
        env = {"CTX_PROXY_UPSTREAM_URL": upstream.base_url, "CTX_PROXY_RECORDERS": "2", "CELERY_TASK_ALWAYS_EAGER": "1"}
        args = ["--worker-class", "gthread", "--threads", "8"]
        with gunicorn_on_postgres(f"{database}_live_concurrent", workers=2, extra_env=env, pg=pg, extra_args=args) as (
            hostport,
            app_env,
        ):
            key = make_key(app_env, "agents")
            assert Client(hostport, key).call("POST", "/api/v1/projects/", {"name": "agents"})[0] == 201
            started = time.monotonic()
            threads = [
                threading.Thread(target=agent, args=(hostport, key, conversation, n % 2 == 0, failures))
                for n, conversation in enumerate(exchanges.values())
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(300)
            elapsed = time.monotonic() - started
            expected = {sid: len(held(e)) for sid, e in exchanges.items()}
            found, rejections = settled(app_env["DATABASE_URL"], "agents", expected)

    requests = sum(len(e) for e in exchanges.values())
    split = sum(len(found.get(sid, [])) > 1 for sid in exchanges)
    extra = sum(max(0, len(said) - len(held(exchanges[sid]))) for sid in exchanges for _, said, _ in found.get(sid, []))
    notes = sum(n for sessions in found.values() for _, _, n in sessions)
    unequal = [sid for sid in exchanges if [said for _, said, _ in found.get(sid, [])] != [held(exchanges[sid])]]
    summary = (f"{AGENTS} conversations at once ({requests} requests, {elapsed:.1f} s): {len(found)} conversations "
               f"recorded in {sum(map(len, found.values()))} sessions, {split} split, {extra} messages duplicated, "
               f"{notes} notes, {rejections} rejections, {len(unequal)} not equal to the conversation")  # fmt: skip
    with capsys.disabled():
        print(f"\n{summary}")
    assert failures == [] and len(upstream.requests_for("messages")) == requests
    shapes = {sid: ([len(said) for _, said, _ in found.get(sid, [])], len(held(exchanges[sid]))) for sid in unequal}
    lengths = f"{summary}; stored vs held lengths: {shapes}"
    assert (split, extra, notes, rejections, unequal) == (0, 0, 0, 0, []), lengths
