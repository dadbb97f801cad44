"""Messages as the API answers them, built as plain dicts: what ``serializers.MessageOut`` and
``AppendedMessageOut`` document and give, at a twentieth of their cost (a DRF serializer took
0.5 ms for one message, the most of an append's answer; a page of 1,000 was half a second).
``tests/api/test_message_rows.py`` holds the two to the same output."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from rest_framework import serializers

from compaction.tokens import calibrate
from sessions_app.models import Message

_CREATED_AT = serializers.DateTimeField()  # DRF's own rendering: ISO 8601 in the current zone, UTC as "Z"


def message_rows(
    messages: Iterable[Message], *, calibration: float, mismatched: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """``MessageOut(messages, many=True).data``; with ``mismatched`` (the client ids stored already
    with another role or content), ``AppendedMessageOut``'s, its ``mismatch`` flag included."""
    rows = []
    for m in messages:
        row = {
            "id": m.pk,
            "seq": m.seq,
            "role": str(m.role),
            "content": m.content,
            "tokens": calibrate(m.tokens, calibration),
            "tokens_exact": m.tokens_exact,
            "client_id": None if m.client_id is None else str(m.client_id),
            "state": str(m.state),
            "compaction": m.compaction_id,
            "metadata": m.metadata,
            "created_at": _CREATED_AT.to_representation(m.created_at),
        }
        if mismatched is not None:
            row["mismatch"] = m.client_id in mismatched
        rows.append(row)
    return rows
