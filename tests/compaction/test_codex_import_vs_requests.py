"""The Codex import against what the real CLI sent, on the requests and rollout it recorded
(``tests/fixtures/clients/codex_0.169.0/``, plain run): the import's messages are those of Codex's
last request; its system prompt is not quite the one Codex sent (a known difference, below)."""

from __future__ import annotations

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


def test_the_imported_system_prompt_is_codexs_template_of_the_one_it_sent():
    """The rollout keeps Codex's instructions template (``session_meta.base_instructions``); ``codex
    exec`` sends it less the lines for what it does not offer (a checklist tool): the import's system
    prompt holds every line Codex sent, in order, and only whole lines more (docs/INGEST.md)."""
    sent, conv = sent_and_imported()
    template, said = conv.system_prompt.splitlines(), sent["system"].splitlines()
    extra = list(template)
    for line in said:  # the sent lines, in order, within the template
        assert line in extra, line[:120]
        extra = extra[extra.index(line) + 1 :]
    more = len(template) - len(said)
    assert 0 <= more <= 3
