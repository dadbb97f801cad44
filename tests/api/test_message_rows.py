"""The messages the API answers, built as plain dicts (``api.message_rows``), are what the documented
serializers (``MessageOut``, ``AppendedMessageOut``) give, field for field, for any message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.api import serializers as s
from sessions_app.api.message_rows import message_rows
from sessions_app.models import Message, MessageState

texts = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=30)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
zones = st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))])
moments = st.builds(
    lambda at, zone: at.replace(tzinfo=UTC).astimezone(zone),
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)),
    zones,
)
messages = st.builds(
    lambda pk, seq, role, content, tokens, exact, client_id, state, compaction, metadata, created_at: Message(
        pk=pk,
        seq=seq,
        role=role,
        content=content,
        tokens=tokens,
        tokens_exact=exact,
        client_id=client_id,
        state=state,
        compaction_id=compaction,
        metadata=metadata,
        created_at=created_at,
    ),
    st.none() | st.integers(1, 2**40),
    st.integers(0, 2**31),
    st.sampled_from(["user", "assistant", "tool", "system"]),
    texts | st.lists(st.dictionaries(texts, json_values, max_size=3), max_size=3),
    st.integers(0, 2**31),
    st.none() | st.integers(0, 2**31),
    st.none() | texts,
    st.sampled_from(list(MessageState)),
    st.none() | st.integers(1, 2**40),
    st.dictionaries(texts, json_values, max_size=3),
    moments,
)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(messages, max_size=4),
    calibration=st.floats(0.2, 5.0),
    mismatched=st.none() | st.frozensets(texts, max_size=3),
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/Los_Angeles"]),
)
def test_the_plain_rows_are_the_serializers_output(rows, calibration, mismatched, zone):
    # Some client ids of the batch among the mismatched ones, as an append answers them.
    if mismatched is not None:
        mismatched = mismatched | {m.client_id for m in rows[::2] if m.client_id is not None}
    with override_settings(TIME_ZONE=zone):
        if mismatched is None:
            documented = s.MessageOut(rows, many=True, context={"calibration": calibration}).data
        else:
            context = {"calibration": calibration, "mismatched": mismatched}
            documented = s.AppendedMessageOut(rows, many=True, context=context).data
        plain = message_rows(rows, calibration=calibration, mismatched=mismatched)
    assert plain == [dict(row) for row in documented]
    assert [list(row) for row in plain] == [list(row) for row in documented]  # the same keys, in order
