"""Codex rollout files (``--format codex``) streamed through transcript sync, as a property: whatever
the cut into whole-line uploads (``final`` on any, repeated ranges), the session equals a one-shot
import of the file — rows, both contexts, STATUS — and no upload is refused. Over a file the real
Codex CLI wrote (``tests/fixtures/codex/``) and generated ones: reasoning, parallel function calls,
freeform (custom) calls, turns ended and not, unreadable lines."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcripts import read_transcript
from sessions_app.errors import ServiceError
from sessions_app.models import AgentSession
from sessions_app.services import importing, projects, transcript_sync
from tests.hypothesis_budget import SERVER
from tests.transcript_stream import Upload, contexts, random_plan, rows, usage_of

pytestmark = [pytest.mark.django_db]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
TURN = st.lists(
    st.sampled_from(["reasoning", "call", "calls", "patch", "say", "bad_line", "end", "compact", "compact_remote"]),
    min_size=1,
    max_size=8,
)


class Rollout:
    """A Codex rollout written one line at a time, as Codex writes it."""

    def __init__(self, thread: str) -> None:
        self.thread, self.n = thread, 0
        self.lines: list[str] = []
        self.line(
            "session_meta",
            {"id": thread, "cwd": "/w", "cli_version": "0.169.0", "base_instructions": {"text": "You are Codex."}},
        )
        self.line("turn_context", {"model": "gpt-5.5", "cwd": "/w"})

    def line(self, kind: str, payload: dict[str, Any]) -> None:
        self.n += 1
        self.lines.append(
            json.dumps({"timestamp": f"2026-11-27T00:00:{self.n % 60:02d}.000Z", "type": kind, "payload": payload})
            + "\n"
        )

    def item(self, item: dict[str, Any]) -> None:
        self.line("response_item", {**item, "internal_chat_message_metadata_passthrough": {"turn_id": "t"}})

    def step(self, what: str) -> None:
        n = self.n
        if what == "reasoning":
            self.item(
                {
                    "type": "reasoning",
                    "id": f"rs_{n}",
                    "summary": [{"type": "summary_text", "text": "hm"}],
                    "content": None,
                    "encrypted_content": f"enc{n}",
                }
            )
        elif what in ("call", "calls"):
            calls = [f"call_{n}_{k}" for k in range(1 if what == "call" else 3)]
            for c in calls:
                self.item(
                    {
                        "type": "function_call",
                        "id": f"fc_{c}",
                        "call_id": c,
                        "name": "exec_command",
                        "arguments": json.dumps({"cmd": f"ls {c}"}),
                        "status": "completed",
                    }
                )
            self.usage()
            for c in calls:
                self.item({"type": "function_call_output", "call_id": c, "output": f"out of {c}\n" * 3})
        elif what == "patch":
            c = f"call_{n}_p"
            self.item(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_{n}",
                    "call_id": c,
                    "name": "apply_patch",
                    "input": "*** Begin Patch\n*** End Patch\n",
                    "status": "completed",
                }
            )
            self.usage()
            self.item({"type": "custom_tool_call_output", "call_id": c, "output": "Success."})
        elif what == "say":
            self.item(
                {
                    "type": "message",
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": f"Said {n}.", "annotations": []}],
                }
            )
            self.usage()
        elif what in ("compact", "compact_remote"):
            self.compacted(remote=what == "compact_remote")
        elif what == "bad_line":
            self.lines.append("{not json\n")
        else:
            self.line("event_msg", {"type": "task_complete", "turn_id": "t"})

    def compacted(self, *, remote: bool) -> None:
        """Codex compacting its history: the summary's response (local), then the history it starts over
        from: the skills message, the user's messages, the summary or the provider's opaque item."""
        n = self.n
        if not remote:
            said = {"type": "message", "id": f"msg_s{n}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": f"Summary {n}.", "annotations": []}]}  # fmt: skip
            self.lines.append(
                json.dumps({"type": "response_item", "payload": said, "metadata": {"compaction_output": True}}) + "\n"
            )
        users = [
            json.loads(line)["payload"] for line in self.lines if '"role": "user"' in line and "response_item" in line
        ]
        kept = [u for u in users if not any(p.get("text", "").startswith("Another language") for p in u["content"])]
        summary = f"Another language model started to solve this problem… Summary {n}."
        last: dict[str, Any] = (
            {"type": "compaction", "id": f"cmp_{n}", "encrypted_content": f"opaque {n}"}
            if remote
            else {"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]}
        )
        developer = {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "<skills>…</skills>"}],
        }
        self.line(
            "compacted", {"message": "" if remote else f"Summary {n}.", "replacement_history": [developer, *kept, last]}
        )

    def usage(self) -> None:
        self.line(
            "token_usage_record",
            {"response_id": f"resp_{self.n}", "usage": {"input_tokens": 1000 + 10 * self.n, "output_tokens": 9}},
        )

    def prompt(self, text: str) -> None:
        self.item(
            {
                "type": "message",
                "id": f"msg_u{self.n}",
                "role": "user",
                "content": [{"type": "input_text", "text": text}],
            }
        )


def generated(turns: list[list[str]]) -> bytes:
    rollout = Rollout("thread-gen")
    rollout.item(
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<skills>…</skills>"}]}
    )
    for k, turn in enumerate(turns):
        rollout.prompt(f"turn {k}")
        for what in turn:
            rollout.step(what)
    return "".join(rollout.lines).encode()


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user(username="codex-streamer", password="x-pass-123")


def _project(user: Any, name: str) -> Any:
    project = projects.project_create(user=user, name=name)
    project.policy.auto = False  # compare what was stored, not what a compaction made of it
    project.policy.save()
    return project


def assert_stream_equals_import(user: Any, data: bytes, plan: list[Upload], tag: str) -> None:
    streamed, imported = _project(user, f"streamed {tag}"), _project(user, f"imported {tag}")
    held = 0
    for up in plan:
        start = min(up.start, held)
        try:
            result = transcript_sync.transcript_sync(
                user=user, project=streamed, external_id="codex-stream", offset=start,
                lines=data[start : up.end].decode("utf-8", errors="replace"), final=up.final, fmt="codex",
            )  # fmt: skip
        except ServiceError as exc:
            raise AssertionError(f"{up}: refused: {exc.code}: {exc.detail}") from exc
        held = result.offset
    reference = importing.session_import(
        user=user, project=imported, transcript=read_transcript(data, "codex"), name="codex-stream"
    )
    main = AgentSession.objects.get(project=streamed, external_id="codex-stream")
    assert rows(main) == rows(reference.session)
    assert contexts(main) == contexts(reference.session)
    assert usage_of(main) == usage_of(reference.session)


@pytest.mark.slow
@settings(SERVER)
@given(turns=st.lists(TURN, min_size=1, max_size=4), seed=st.integers(0, 2**32 - 1))
def test_any_chunking_of_a_generated_rollout_equals_its_import(owner, turns, seed):
    data = generated(turns)
    rng = random.Random(seed)
    plan = random_plan(data, rng, max_lines=rng.choice([1, 2, 5]), p_final=rng.choice([0.2, 0.5, 1.0]))
    assert_stream_equals_import(owner, data, plan, f"{seed}")


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.jsonl")))
@pytest.mark.parametrize("seed", range(3))
def test_any_chunking_of_a_real_rollout_equals_its_import(owner, name, seed):
    data = (FIXTURES / name).read_bytes()
    rng = random.Random(seed)
    assert_stream_equals_import(
        owner, data, random_plan(data, rng, max_lines=1 + seed * 3, p_final=0.5), f"{name}{seed}"
    )


def test_the_import_reads_the_thread_its_prompt_and_its_turns(owner):
    transcript = read_transcript((FIXTURES / "rollout-exec-resume.jsonl").read_bytes(), "codex")
    (conv,) = transcript.conversations
    assert conv.external_id and conv.model == "gpt-5.5"
    assert conv.system_prompt.startswith("You are Codex") and "<skills_instructions>" in conv.system_prompt
    roles = [m["role"] for m in conv.messages]
    assert roles[:2] == ["user", "user"] and roles.count("tool") == 3 and roles[-1] == "assistant"
    said = [b["text"] for m in conv.messages if m["role"] == "user" for b in m["content"] if b["type"] == "text"]
    assert said[1:] == ["say hi via shell", "again"]
    assert conv.usage_points and all(conv.messages[p.message_index]["role"] == "assistant" for p in conv.usage_points)
