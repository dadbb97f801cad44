"""Project settings and API keys in the browser: every form's success, its error next to the field,
non-admins refused (403) and outsiders 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions_app.models import ApiKey, CompactionPolicy, Membership
from sessions_app.services import keys

pytestmark = pytest.mark.django_db


def url(name: str, *args) -> str:
    return reverse(f"web:{name}", args=args)


@pytest.fixture
def as_user(client):
    def login(persona):
        client.force_login(persona.user)
        return client

    return login


def test_only_admins_open_settings_and_outsiders_get_404(as_user, team):
    path = url("project-settings", team.project.pk)
    assert as_user(team.alice).get(path).status_code == 200
    assert as_user(team.bob).get(path).status_code == 403
    assert as_user(team.carol).get(path).status_code == 403
    assert as_user(team.mallory).get(path).status_code == 404
    project_page = as_user(team.bob).get(url("project", team.project.pk)).content.decode()
    assert path not in project_page  # no Settings link for a member


@pytest.mark.parametrize(
    ("name", "args", "data"),
    [
        ("member-add", (), {"username": "carol", "role": "admin"}),
        ("member-role", ("carol",), {"mcarol-role": "admin"}),
        ("member-remove", ("carol",), {}),
        ("policy-preset", (), {"preset": "kai"}),
        ("policy-update", (), {"remind": "0.5"}),
        ("openai-key", (), {"api_key": "sk-proj-openai-1234"}),
    ],
)
def test_settings_forms_refuse_non_admins_and_outsiders(as_user, team, name, args, data):
    users = {"carol": team.carol.user.pk}
    path = url(name, team.project.pk, *(users[a] for a in args))
    policy = CompactionPolicy.objects.filter(project=team.project)
    before = (list(Membership.objects.values_list("user", "role")), policy.get().remind)
    assert as_user(team.bob).post(path, data).status_code == 403
    assert as_user(team.carol).post(path, data).status_code == 403
    assert as_user(team.mallory).post(path, data).status_code == 404
    assert (list(Membership.objects.values_list("user", "role")), policy.get().remind) == before


def test_add_a_member_and_an_unknown_user_is_an_error_next_to_the_field(as_user, team):
    admin = as_user(team.alice)
    response = admin.post(url("member-add", team.project.pk), {"username": "mallory", "role": "viewer"})
    assert response.status_code == 302
    assert Membership.objects.get(project=team.project, user=team.mallory.user).role == "viewer"
    bad = admin.post(url("member-add", team.project.pk), {"username": "nobody", "role": "viewer"})
    assert bad.status_code == 400
    body = bad.content.decode()
    field = body.split('id="id_username"', 1)[1].split("</p>", 1)[0]
    assert "No active user is called &#x27;nobody&#x27;" in field


def test_change_a_role_remove_a_member_but_never_the_last_admin(as_user, team):
    admin = as_user(team.alice)
    carol, alice = team.carol.user, team.alice.user
    admin.post(url("member-role", team.project.pk, carol.pk), {f"m{carol.pk}-role": "member"})
    assert Membership.objects.get(project=team.project, user=carol).role == "member"
    admin.post(url("member-remove", team.project.pk, carol.pk))
    assert not Membership.objects.filter(project=team.project, user=carol).exists()
    refused = admin.post(url("member-role", team.project.pk, alice.pk), {f"m{alice.pk}-role": "viewer"}, follow=True)
    assert "at least one admin" in refused.content.decode()
    assert Membership.objects.get(project=team.project, user=alice).role == "admin"
    admin.post(url("member-remove", team.project.pk, alice.pk))
    assert Membership.objects.filter(project=team.project, user=alice).exists()
    assert admin.post(url("member-role", team.project.pk, team.mallory.user.pk), {}).status_code == 404


def test_apply_a_preset_and_an_unknown_one_is_an_error(as_user, team):
    admin = as_user(team.alice)
    assert admin.post(url("policy-preset", team.project.pk), {"preset": "kai"}).status_code == 302
    policy = CompactionPolicy.objects.get(project=team.project)
    assert (policy.preset, policy.compact, policy.output_reserve) == ("kai", 0.65, 0.15)
    bad = admin.post(url("policy-preset", team.project.pk), {"preset": "nope"})
    assert bad.status_code == 400 and "Select a valid choice" in bad.content.decode()


def policy_data(policy: CompactionPolicy, **changes) -> dict:
    from sessions_app.web.forms import PolicyForm

    data = {name: getattr(policy, name) for name in PolicyForm.Meta.fields}
    data = {name: "" if value is None else value for name, value in data.items()}  # an unset number: empty
    data["preserve_patterns"] = "\n".join(policy.preserve_patterns or [])
    data["auto"] = "on" if data["auto"] else ""
    return {**data, **changes}


def test_edit_the_policy_with_the_admin_validation(as_user, team):
    admin = as_user(team.alice)
    policy = CompactionPolicy.objects.get(project=team.project)
    ok = admin.post(url("policy-update", team.project.pk), policy_data(policy, remind="0.5", summary_budget="800"))
    assert ok.status_code == 302
    policy.refresh_from_db()
    assert (policy.remind, policy.summary_budget, policy.preset) == (0.5, 800, "custom")

    bad = admin.post(url("policy-update", team.project.pk), policy_data(policy, remind="0.9", compact="0.7"))
    assert bad.status_code == 400
    body = bad.content.decode()
    compact_field = body.split('id="id_compact"', 1)[1].split("</p>", 1)[0]
    assert "Must be at least the remind threshold" in compact_field
    regex = admin.post(url("policy-update", team.project.pk), policy_data(policy, preserve_patterns="ok\n(unclosed"))
    assert regex.status_code == 400
    patterns_field = regex.content.decode().split('id="id_preserve_patterns"', 1)[1].split("</p>", 1)[0]
    assert "is not a valid regular expression" in patterns_field  # the engine's check, as in admin and REST
    policy.refresh_from_db()
    assert policy.remind == 0.5


def test_the_preset_label_follows_the_numbers_on_the_settings_page(as_user, team):
    admin = as_user(team.alice)
    policy = CompactionPolicy.objects.get(project=team.project)
    admin.post(url("policy-preset", team.project.pk), {"preset": "kai"})
    policy.refresh_from_db()
    assert policy.preset == "kai"
    # Saving the form unchanged keeps the name; one number off the preset makes it custom.
    assert admin.post(url("policy-update", team.project.pk), policy_data(policy)).status_code == 302
    policy.refresh_from_db()
    assert policy.preset == "kai"
    admin.post(url("policy-update", team.project.pk), policy_data(policy, summary_budget="700"))
    policy.refresh_from_db()
    assert (policy.preset, policy.summary_budget) == ("custom", 700)
    assert "(preset: custom)" in admin.get(url("project-settings", team.project.pk)).content.decode()


def test_api_keys_are_shown_once_stored_hashed_and_revocable(as_user, team):
    member = as_user(team.bob)
    response = member.post(url("key-create"), {"name": "laptop agent"})
    assert response.status_code == 200
    body = response.content.decode()
    raw = body.split('id="new-key-value">', 1)[1].split("<", 1)[0]
    key = ApiKey.objects.get(user=team.bob.user, name="laptop agent")
    assert raw.startswith(key.prefix) and key.key_hash != raw and keys.apikey_authenticate(raw) == key
    listing = member.get(url("keys")).content.decode()
    assert raw not in listing and f"{key.prefix}…" in listing
    assert member.post(url("key-revoke", key.pk)).status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None and keys.apikey_authenticate(raw) is None
    too_long = member.post(url("key-create"), {"name": "x" * 101})
    assert too_long.status_code == 400 and "at most 100 characters" in too_long.content.decode()


def test_keys_on_the_settings_page_and_nobody_revokes_anothers_key(as_user, team):
    admin = as_user(team.alice)
    created = admin.post(url("key-create"), {"name": "ci", "project": team.project.pk})
    assert created.status_code == 200 and "Compaction policy" in created.content.decode()
    assert 'id="new-key-value"' in created.content.decode()
    bobs = ApiKey.objects.filter(user=team.bob.user).first()
    assert admin.post(url("key-revoke", bobs.pk)).status_code == 404
    bobs.refresh_from_db()
    assert bobs.revoked_at is None
    as_user(team.bob)
    assert as_user(team.bob).post(url("key-create"), {"name": "x", "project": team.project.pk}).status_code == 403


def test_the_last_admin_cannot_demote_themselves_through_add_member(as_user, team):
    admin = as_user(team.alice)
    response = admin.post(url("member-add", team.project.pk), {"username": "alice", "role": "viewer"})
    assert response.status_code == 400
    field = response.content.decode().split('id="id_role"', 1)[1].split("</p>", 1)[0]
    assert "at least one admin" in field
    assert Membership.objects.get(project=team.project, user=team.alice.user).role == "admin"


def test_a_key_for_a_project_one_cannot_administer_is_refused_before_it_is_made(as_user, team):
    """The settings page a key form names is checked first: a refused request creates no key."""
    for persona, status in ((team.carol, 403), (team.bob, 403), (team.mallory, 404)):
        before = set(ApiKey.objects.values_list("pk", flat=True))
        response = as_user(persona).post(url("key-create"), {"name": "sneaky", "project": team.project.pk})
        assert response.status_code == status, persona.user.username
        assert set(ApiKey.objects.values_list("pk", flat=True)) == before, persona.user.username
    assert not ApiKey.objects.filter(name="sneaky").exists()

    created = as_user(team.alice).post(url("key-create"), {"name": "ci", "project": team.project.pk})
    assert created.status_code == 200 and 'id="new-key-value"' in created.content.decode()
    assert ApiKey.objects.filter(user=team.alice.user, name="ci").count() == 1


def test_revoking_through_a_project_one_cannot_administer_revokes_nothing(as_user, team):
    key = ApiKey.objects.get(user=team.carol.user)
    assert as_user(team.carol).post(url("key-revoke", key.pk), {"project": team.project.pk}).status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None


PROJECT_KEY = "sk-ant-project-key-0123456789abcdef"


def test_an_admin_sets_the_proxys_key_which_is_stored_sealed_and_shown_only_by_its_end(as_user, team):
    from sessions_app.models import Project
    from sessions_app.services import sealing

    path = url("upstream-key", team.project.pk)
    for persona, refused in ((team.bob, 403), (team.carol, 403), (team.mallory, 404)):
        assert as_user(persona).post(path, {"api_key": PROJECT_KEY}).status_code == refused
    assert Project.objects.get(pk=team.project.pk).upstream_api_key == ""  # nothing written before the check
    answer = as_user(team.alice).post(path, {"api_key": f"  {PROJECT_KEY} "}, follow=True)
    assert answer.status_code == 200
    page = answer.content.decode()
    assert PROJECT_KEY not in page and "…cdef" in page
    stored = Project.objects.get(pk=team.project.pk)
    assert PROJECT_KEY not in stored.upstream_api_key and sealing.unseal(stored.upstream_api_key) == PROJECT_KEY
    refused = as_user(team.alice).post(path, {"api_key": "sk ant\nkey with spaces"})
    assert refused.status_code == 400 and "printable" in refused.content.decode()
    assert sealing.unseal(Project.objects.get(pk=team.project.pk).upstream_api_key) == PROJECT_KEY  # unchanged
    as_user(team.alice).post(path, {"api_key": ""})
    assert Project.objects.values_list("upstream_api_key", "upstream_api_key_hint").get(pk=team.project.pk) == ("", "")


def test_sealed_secrets_open_under_a_rotated_key_and_not_after_the_secret_key_changed(settings):
    from cryptography.fernet import Fernet

    from sessions_app.services import sealing

    derived = sealing.seal("secret one")
    settings.SECRET_KEY = "another-secret-key-" + "x" * 40
    assert sealing.unseal(derived) is None  # derived from the old SECRET_KEY
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CTX_ENCRYPTION_KEYS = old
    sealed = sealing.seal("secret two")
    settings.CTX_ENCRYPTION_KEYS = f"{new},{old}"  # rotated: the new one seals, both open
    assert sealing.unseal(sealed) == "secret two"
    assert sealing.unseal(sealing.seal("secret three")) == "secret three"
    settings.CTX_ENCRYPTION_KEYS = new
    assert sealing.unseal(sealed) is None and sealing.unseal("not a token") is None


def test_an_admin_sets_the_projects_openai_key_for_summaries_sealed_and_shown_only_by_its_end(as_user, team):
    from sessions_app.models import Project
    from sessions_app.services import projects, sealing

    key = "sk-proj-openai-summaries-9876"
    path = url("openai-key", team.project.pk)
    for persona, refused in ((team.bob, 403), (team.carol, 403), (team.mallory, 404)):
        assert as_user(persona).post(path, {"api_key": key}).status_code == refused
    assert Project.objects.get(pk=team.project.pk).openai_api_key == ""  # nothing written before the check
    answer = as_user(team.alice).post(path, {"api_key": f" {key} "}, follow=True)
    assert answer.status_code == 200
    page = answer.content.decode()
    assert key not in page and "…9876" in page
    assert page.count('id="id_api_key"') == page.count('id="id_openai_api_key"') == 1, "one id per field"
    stored = Project.objects.get(pk=team.project.pk)
    assert key not in stored.openai_api_key and sealing.unseal(stored.openai_api_key) == key
    assert stored.upstream_api_key == "", "the Anthropic key is another"
    refused = as_user(team.alice).post(path, {"api_key": "sk with spaces"})
    assert refused.status_code == 400 and "printable" in refused.content.decode()
    assert projects.project_provider_key(Project.objects.get(pk=team.project.pk), "openai") == key  # unchanged
    as_user(team.alice).post(path, {"api_key": ""})
    assert Project.objects.values_list("openai_api_key", "openai_api_key_hint").get(pk=team.project.pk) == ("", "")


def test_the_settings_page_says_who_writes_summaries_and_with_whose_key(as_user, team, settings):
    from sessions_app.services import projects

    settings.ANTHROPIC_API_KEY = settings.OPENAI_API_KEY = ""
    policy = projects.policy_ensure(project=team.project)

    def status() -> str:
        page = as_user(team.alice).get(url("project-settings", team.project.pk)).content.decode()
        start = page.index('id="summarizer-status"')
        return " ".join(page[start : page.index("</p>", start)].split())

    assert "No Anthropic API key" in status() and "offline" in status()
    projects.policy_update(policy=policy, changes={"summarizer_provider": "openai", "summarizer_model": "gpt-4o"})
    assert "No OpenAI API key" in status()
    settings.OPENAI_API_KEY = "sk-server"
    assert "<code>openai:gpt-4o</code> with the server's key" in status()
    projects.project_provider_key_set(project=team.project, provider="openai", api_key="sk-proj-key-1234")
    assert "with this project's key" in status()
    projects.policy_update(policy=policy, changes={"summarizer_provider": "offline"})
    assert "written offline" in status() and "No " not in status()


def test_the_policy_form_offers_the_summarizers_providers(as_user, team):
    page = as_user(team.alice).get(url("project-settings", team.project.pk)).content.decode()
    assert 'name="summarizer_provider"' in page
    for value in ("anthropic", "openai", "offline"):
        assert f'<option value="{value}"' in page
