"""The OpenCode task, replayed against the requests the real OpenCode CLI sent it (the fixtures): each
request holds, as its newest assistant message, the turn the script gave the request before it."""

from __future__ import annotations

import itertools

from tests.clients.opencode import CONTENT, load_fixtures
from tests.fakes.scripted_model import SIDE_REPLY, ScriptedModel, assistant_turns, text
from tests.fakes.scripted_opencode import coding_task, is_opencode_main


def test_the_script_answers_each_recorded_request_with_the_turn_opencode_sent_back_next():
    requests = [r["body"] for r in load_fixtures()]
    model = ScriptedModel(coding_task("/work/project", content=CONTENT), is_main=is_opencode_main)
    main = [b for b in requests if is_opencode_main(b)]
    for before, after in itertools.pairwise(main):
        answer = model(before)["content"]
        sent_back = [m for m in after["messages"] if m["role"] == "assistant"][-1]["content"]
        assert assistant_turns(after) == assistant_turns(before) + 1
        assert (
            [b.get("id") for b in sent_back if b["type"] == "tool_use"]
            == [b["id"] for b in answer if b["type"] == "tool_use"]
            != []
        )
    assert model(main[-1])["content"] == [text(model.final)]
    titles = [b for b in requests if not is_opencode_main(b)]
    assert len(titles) == 1 and model(titles[0])["content"] == [text(SIDE_REPLY)]
