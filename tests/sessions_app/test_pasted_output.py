"""A user message holding a long pasted log: `compact` clears the log and keeps the sentence the person
typed above it; a revert gives the message back byte for byte (over the REST API)."""

from __future__ import annotations

import pytest

from compaction.reversible import MARK
from tests.sessions_app.compaction_helpers import rows_of, totals_of

pytestmark = pytest.mark.django_db

TYPED = "The nightly import dies again \u2014 this is what the runner printed, can you find why?"
ERROR = "ERROR importer.csv: failed to decode /srv/import/data/2024-05.csv (byte 0xef at 0)"


def pasted_log(lines: int) -> str:
    out = [
        f"2024-05-01 12:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{i % 4}: batch {i} of src/jobs/nightly.py "
        f"wrote {i * 17} rows to table import_{i % 9}"
        for i in range(lines)
    ]
    out.insert(lines // 2, ERROR)
    return "\n".join(out)


def text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def test_a_pasted_log_is_condensed_by_compact_and_restored_by_revert(team, api_as, session_of):
    session = session_of(model="claude-sonnet-4-5", auto_compact=False)
    api = api_as(team.bob)
    pasted = f"{TYPED}\r\nBash output:\r\n{pasted_log(1_600)}\n\nThanks!  "
    messages = [
        {"role": "user", "content": pasted},
        {"role": "assistant", "content": "The decoder chokes on a byte-order mark; looking at importer/csv.py."},
        {"role": "user", "content": "Also keep the legacy loader as it is."},
        {"role": "assistant", "content": "Understood."},
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": "Opening importer/csv.py."},
    ]
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", messages)
    assert response.status_code == 201, response.content
    first = response.json()["messages"][0]
    assert first["tokens"] >= 40_000
    rows, totals = rows_of(session), totals_of(session)

    record = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": "compact"}).json()
    assert record["status"] == "succeeded", record
    (item,) = [i for i in record["items"] if i["seq"] == first["seq"]]
    assert item["strategy"] == "pasted_output"
    assert item["tokens_after"] < 1_000 < 40_000 <= item["tokens_before"]

    context = api.get(f"/api/v1/sessions/{session.pk}/context/").json()
    said = text_of(context["messages"][0]["content"])
    assert said.startswith(f"{TYPED}\r\nBash output:\r\n{MARK} pasted output cleared (")
    assert ERROR in said and "src/jobs/nightly.py" in said
    assert said.endswith("\n\nThanks!  ")
    assert "batch 800 of" not in said

    reverted = api.post(f"/api/v1/compactions/{record['id']}/revert/")
    assert reverted.status_code == 200, reverted.content
    assert rows_of(session) == rows and totals_of(session) == totals
    context = api.get(f"/api/v1/sessions/{session.pk}/context/").json()
    assert text_of(context["messages"][0]["content"]) == pasted
