"""The Codex import against what the real CLI sent, on the requests and rollout it recorded
(``tests/fixtures/clients/codex_0.169.0/``, plain run): the import's messages are those of Codex's
last request; its system prompt is not quite the one Codex sent (a known difference, below)."""

from __future__ import annotations

import pytest

from compaction.transcripts import codex
from compaction.transcripts.base import Conversation
from compaction.transcripts.responses import request_as_anthropic
from tests.clients.codex import FIXTURES, load_fixtures


def sent_and_imported() -> tuple[dict, Conversation]:
    sent = request_as_anthropic(load_fixtures()[-1]["body"])
    assert sent is not None
    (conv,) = codex.read((FIXTURES / "rollout.jsonl").read_text()).conversations
    return sent, conv


def test_the_import_holds_every_message_of_codexs_last_request_and_its_answer():
    sent, conv = sent_and_imported()
    said = [(m["role"], m["content"]) for m in sent["messages"]]
    imported = [(m["role"], m["content"]) for m in conv.messages]
    assert len(imported) == len(said) + 1 and imported[-1][0] == "assistant"
    assert [role for role, _ in imported[:-1]] == [role for role, _ in said]


@pytest.mark.xfail(
    strict=True,
    reason="the rollout keeps Codex's instructions template (session_meta.base_instructions), and "
    "`codex exec` sends it less one line ('- If you create a checklist or task list, …'): an import's "
    "system prompt is one line longer than what the proxy records of the same thread",
)
def test_the_imported_system_prompt_is_the_one_codex_sent():
    sent, conv = sent_and_imported()
    assert conv.system_prompt == sent["system"]
