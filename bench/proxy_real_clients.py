"""Real Claude Code CLIs at once through ctxweb's proxy (issue 28: "20 such conversations at once: 0
split, 0 duplicated").

    .venv/bin/python bench/proxy_real_clients.py [--clients 20] [--timeout 900]

Needs ``make clients`` (the pinned CLI), DATABASE_URL (Postgres: a fresh database is made next to it)
and REDIS_URL. The stack is the live test's (``tests/clients/stack.py``): gunicorn with two gthread
workers, two recorder threads each, a real Celery worker, Postgres. One fake Anthropic server plays
each CLI's model (``tests/fakes/coding_task``: 20+ requests of thinking, parallel tool calls,
failing commands, large outputs, ToolSearch, tasks, a subagent, files written, edited and read),
telling the CLIs apart by the working directory their requests name. ``--clients`` CLIs run the task
at once, each with a HOME and a working directory of its own. Afterwards each CLI's transcript is
imported (``ctx import``); the CLI's conversation through the proxy is compared with what it sent
(its longest request with the task's prompt, and the answer to it) and with that import.

Prints: the CLIs that finished their task, the requests, the sessions; how many conversations were
split (a session retired for a fresh one), how many differ from what the CLI sent, messages
duplicated or missing against it; notes, rejections; how many equal their import; the CLIs' wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
django.setup()  # the comparison reads messages as ctxweb's own modules do

from bench._server import Client, make_key  # noqa: E402
from sessions_app.services.proxy.identity import conversation_of  # noqa: E402
from sessions_app.services.proxy.messages import identity  # noqa: E402
from tests.clients.claude_code import Run, installed, run_claude  # noqa: E402
from tests.clients.stack import StoredSession, ctx_import, ctxweb_stack, settled  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402
from tests.fakes.coding_task import PROMPT, ScriptedConversations, coding_task, first_user_words  # noqa: E402
from tests.fakes.scripted_model import SIDE_REPLY, text  # noqa: E402

PROJECT = "claude code"


class Models:
    """Each CLI's scripted model, picked by the working directory its requests name."""

    def __init__(self, workdirs: list[Path]) -> None:
        self.tasks: dict[str, ScriptedConversations] = {str(w): coding_task(str(w)) for w in workdirs}

    def __call__(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        said = json.dumps(body)
        for workdir, task in self.tasks.items():
            if workdir in said:
                return task(body)
        return {"content": [text(SIDE_REPLY)], "stop_reason": "end_turn"}


def said(session: StoredSession) -> list[tuple[str, Any]]:
    return [(role, identity(content)) for role, content, _ in session.messages]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=900, help="seconds each CLI may take")
    args = parser.parse_args()
    if not installed():
        print("node or the pinned Claude Code CLI is missing: make clients", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="ctxweb-clients-") as tmp:
        homes = [Path(tmp, f"client-{n:02d}", "home") for n in range(args.clients)]
        workdirs = [Path(tmp, f"client-{n:02d}", "project") for n in range(args.clients)]
        for path in (*homes, *workdirs):
            path.mkdir(parents=True)
        with FakeAnthropic() as upstream, ctxweb_stack("real_clients", upstream.base_url, Path(tmp)) as stack:
            models = Models(workdirs)
            upstream.set_message_function(models)
            key = make_key(stack.env, "claude")
            assert Client(stack.hostport, key).call("POST", "/api/v1/projects/", {"name": PROJECT})[0] == 201
            base_url = f"http://{stack.hostport}/proxy/anthropic"
            runs: list[Run | None] = [None] * args.clients

            def client(n: int) -> None:
                runs[n] = run_claude(base_url, "sk-upstream", workdirs[n], homes[n], ctxweb_key=key, prompt=PROMPT,
                                     timeout=args.timeout)  # fmt: skip

            started = time.monotonic()
            threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.monotonic() - started
            proxied = settled(stack.database_url, PROJECT, seconds=120)
            print(f"{args.clients} Claude Code CLIs at once through ctxweb (gunicorn 2 workers × 2 recorders, "
                  f"Postgres): {len(upstream.requests_for('messages'))} requests, {wall:.1f} s")  # fmt: skip
            report(stack, runs, proxied, conversations(models, upstream.requests_for("messages")))
    return 0


def conversations(models: Models, requests: list[dict[str, Any]]) -> dict[str, list[tuple[str, Any]]]:
    """Each CLI's main conversation as it sent it (working directory → its messages, as what they say):
    the longest history it sent with the task's prompt first, and the model's answer to it."""
    found: dict[str, list[tuple[str, Any]]] = {}
    for request in requests:
        body = request["body"]
        workdir = next((w for w in models.tasks if w in json.dumps(body)), None)
        kept = conversation_of(body)
        if workdir is None or kept is None or PROMPT not in first_user_words(body):
            continue
        answer = models.tasks[workdir](body)["content"]
        history = [(m["role"], identity(m["content"])) for m in kept["messages"]] + [("assistant", identity(answer))]
        if len(history) > len(found.get(workdir, [])):
            found[workdir] = history
    return found


def report(stack: Any, runs: list[Run | None], proxied: list[StoredSession], sent: dict[str, list[Any]]) -> None:
    finished = split = unequal = duplicated = missing = as_imported = 0
    for n, run in enumerate(runs):
        transcripts = run.transcripts() if run is not None else []
        if run is None or run.returncode != 0 or run.result().get("subtype") != "success" or len(transcripts) != 1:
            continue
        finished += 1
        agent = transcripts[0].stem  # Claude Code's session id: its main conversation's external id
        split += any(s.external_id.startswith(f"{agent}@") for s in proxied)
        main = [s for s in proxied if s.external_id == agent]
        got = said(main[0]) if len(main) == 1 else []
        expected = sent.get(str(run.workdir), [])
        unequal += got != expected
        duplicated += max(0, len(got) - len(expected))
        missing += max(0, len(expected) - len(got))
        ctx_import(stack.env, transcripts[0], f"import {n}")
        imported = settled(stack.database_url, f"import {n}", seconds=5)
        as_imported += len(imported) == 1 and said(imported[0]) == got
    notes = sum("[ctxweb:" in str(content) for s in proxied for _, content, _ in s.messages)
    rejections = sum(s.rejections for s in proxied)
    print(f"  finished their task: {finished}/{len(runs)}; sessions: {len(proxied)}")
    print(f"  conversations split: {split}; not equal to what the CLI sent: {unequal}; messages duplicated: "
          f"{duplicated}, missing: {missing}; notes: {notes}; rejections: {rejections}")  # fmt: skip
    print(f"  equal to ctx import of the CLI's transcript: {as_imported}/{finished}")


if __name__ == "__main__":
    sys.exit(main())
