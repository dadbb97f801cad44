"""Numbers in a query string are ASCII digits and nothing else: "²" and "①" (``str.isdigit`` holds,
``int()`` refuses), "٣" and "+3" (``int()`` reads them), 5,000 digits (``int()`` raises) are each a
400 with the parameter's code, never a 500 and never read as another number."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

ODD = ["²", "①", "٣", "３", " 3", "3 ", "+3", "1_0", "3.0", "1" * 5000]


@pytest.mark.parametrize("raw", ODD)
def test_dashboard_days_must_be_ascii_digits(team, api_as, raw):
    response = api_as(team.alice).get(f"/api/v1/projects/{team.project.pk}/dashboard/" + "?" + urlencode({"days": raw}))
    assert (response.status_code, response.json()["code"]) == (400, "invalid_days")


@pytest.mark.parametrize("name", ["after_seq", "limit"])
@pytest.mark.parametrize("raw", ODD)
def test_message_paging_numbers_must_be_ascii_digits(team, api_as, session_of, name, raw):
    session = session_of(name="paged", model="claude-sonnet-4-5")
    response = api_as(team.bob).get(f"/api/v1/sessions/{session.pk}/messages/" + "?" + urlencode({name: raw}))
    assert (response.status_code, response.json()["code"]) == (400, f"invalid_{name}")


def test_plain_numbers_still_page(team, api_as, session_of):
    session = session_of(name="paged", model="claude-sonnet-4-5")
    bob = api_as(team.bob)
    assert (
        bob.post(
            f"/api/v1/sessions/{session.pk}/messages/", [{"role": "user", "content": str(n)} for n in range(3)]
        ).status_code
        == 201
    )
    page = bob.get(
        f"/api/v1/sessions/{session.pk}/messages/" + "?" + urlencode({"after_seq": "1", "limit": "1"})
    ).json()
    assert [m["seq"] for m in page["results"]] == [2]
    assert (
        len(
            api_as(team.alice)
            .get(f"/api/v1/projects/{team.project.pk}/dashboard/" + "?" + urlencode({"days": "007"}))
            .json()["days"]
        )
        == 7
    )


def test_the_project_switcher_reads_an_id_in_ascii_digits_only(team, client):
    client.force_login(team.alice.user)
    arabic = str(team.project.pk).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    assert client.get(reverse("web:projects"), {"go": arabic}).status_code == 404
    assert client.get(reverse("web:projects"), {"go": str(team.project.pk)}).status_code == 302
