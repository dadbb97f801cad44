"""Hostile input against what surrounds the spend surfaces: tokens by tool with odd tool blocks, the
ops page's clear button, budgets in Django admin. Each refusal writes nothing; what is accepted reads
back."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.models import ApiKey, Budget

pytestmark = pytest.mark.django_db


def _error(response: Any) -> None:
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["detail"] and body["code"]


# ----------------------------------------------------------------------------- the ops page's clear button


def test_only_staff_clear_the_exact_count_cache(team, client, monkeypatch):
    from sessions_app.web import ops

    cleared: list[int] = []
    monkeypatch.setattr(ops, "exact_count_cache_clear", lambda: cleared.append(1) or 0)
    assert client.post("/ops/exact-count-cache/clear/").status_code == 302  # to the sign-in page
    client.force_login(team.alice.user)  # a project admin, not staff
    assert client.post("/ops/exact-count-cache/clear/").status_code == 404
    assert client.get("/ops/exact-count-cache/clear/").status_code in (404, 405)
    assert cleared == []
    team.alice.user.is_staff = True
    team.alice.user.save(update_fields=["is_staff"])
    assert client.post("/ops/exact-count-cache/clear/").status_code == 302
    assert cleared == [1]


# ----------------------------------------------------------------------------- tokens by tool

ODD_TOOL_BLOCKS: list[Any] = [
    {"type": "server_tool_use", "id": {"x": 1}, "name": ["web_search"], "input": {}},
    {"type": "mcp_tool_use", "id": 7, "name": None, "input": {"q": "\u202e"}},
    {"type": "server_tool_use", "id": "srv_1", "name": "<b>" + "n" * 5000, "input": {}},
    {"type": "web_search_tool_result", "tool_use_id": {"nested": ["srv_1"]}, "content": []},
    {"type": "mcp_tool_result", "tool_use_id": "srv_1", "content": [{"type": "text", "text": "=1+1"}]},
]


def test_odd_tool_blocks_read_back_on_the_tools_surfaces(team, api_as, session_of, client):
    session = session_of(model="claude-sonnet-4-5")
    api = api_as(team.alice)
    posted = api.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": ODD_TOOL_BLOCKS}],
    )
    if posted.status_code != 201:  # refused whole: a clear 400, nothing stored
        _error(posted)
        assert not session.messages.exists()
        return
    tools = api.get(f"/api/v1/sessions/{session.pk}/tools/")
    assert tools.status_code == 200
    body = tools.json()
    assert body["total"]["tokens"] == sum(t["tokens"] for t in body["tools"])
    assert all(isinstance(t["tool"], str) for t in body["tools"])
    client.force_login(team.alice.user)
    page = client.get(f"/sessions/{session.pk}/")
    assert page.status_code == 200 and b"<b>nnn" not in page.content


def test_admin_refuses_a_budget_on_the_key_of_someone_outside_the_project(team, staff):
    outsider_key = ApiKey.objects.get(user=team.mallory.user)
    response = staff.post(
        "/admin/sessions_app/budget/add/",
        {"project": team.project.pk, "api_key": outsider_key.pk, "period": "day", "limit_usd": "5.00"},
    )
    assert response.status_code == 200  # the form again, with the error
    assert not Budget.objects.filter(project=team.project).exists()
    members_key = ApiKey.objects.get(user=team.bob.user)
    response = staff.post(
        "/admin/sessions_app/budget/add/",
        {"project": team.project.pk, "api_key": members_key.pk, "period": "day", "limit_usd": "5.00"},
    )
    assert response.status_code == 302
    assert list(Budget.objects.filter(project=team.project).values_list("api_key", flat=True)) == [members_key.pk]
