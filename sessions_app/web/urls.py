"""The browser's URLs (the API's are in ``api/urls.py``)."""

from django.urls import path

from sessions_app.web import actions, metrics, ops, project_settings, search, views, webhooks

app_name = "web"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz/", views.healthz, name="healthz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("ops/", ops.ops, name="ops"),
    path("ops/exact-count-cache/clear/", ops.ops_cache_clear, name="ops-cache-clear"),
    path("projects/", views.project_list, name="projects"),
    path("projects/<int:project_id>/", views.project_detail, name="project"),
    path("projects/<int:project_id>/settings/", project_settings.project_settings, name="project-settings"),
    path("projects/<int:project_id>/members/", project_settings.member_add, name="member-add"),
    path("projects/<int:project_id>/members/<int:user_id>/role/", project_settings.member_role, name="member-role"),
    path(
        "projects/<int:project_id>/members/<int:user_id>/remove/", project_settings.member_remove, name="member-remove"
    ),
    path("projects/<int:project_id>/policy/preset/", project_settings.policy_preset, name="policy-preset"),
    path("projects/<int:project_id>/policy/", project_settings.policy_update, name="policy-update"),
    path("projects/<int:project_id>/upstream-key/", project_settings.upstream_key_update, name="upstream-key"),
    path("projects/<int:project_id>/openai-key/", project_settings.openai_key_update, name="openai-key"),
    path("projects/<int:project_id>/settings/webhooks/", webhooks.webhook_list, name="project-webhooks"),
    path("projects/<int:project_id>/settings/webhooks/new/", webhooks.webhook_add, name="webhook-add"),
    path("webhooks/<int:webhook_id>/", webhooks.webhook_edit, name="webhook-edit"),
    path("webhooks/<int:webhook_id>/delete/", webhooks.webhook_delete, name="webhook-delete"),
    path("webhooks/<int:webhook_id>/test/", webhooks.webhook_send_test, name="webhook-test"),
    path("keys/", project_settings.keys, name="keys"),
    path("keys/new/", project_settings.key_create, name="key-create"),
    path("keys/<int:key_id>/revoke/", project_settings.key_revoke, name="key-revoke"),
    path("sessions/<int:session_id>/", views.session_detail, name="session"),
    path("sessions/<int:session_id>/live/", views.session_live, name="session-live"),
    path("sessions/<int:session_id>/requests/", views.session_requests, name="session-requests"),
    path("sessions/<int:session_id>/timeline/", views.session_timeline, name="session-timeline"),
    path("sessions/<int:session_id>/compactions/preview/", actions.compaction_preview, name="compaction-preview"),
    path("sessions/<int:session_id>/compactions/", actions.compaction_run, name="compaction-run"),
    path("sessions/<int:session_id>/handoff/", actions.handoff_create, name="handoff-create"),
    path("sessions/<int:session_id>/retry/", actions.session_retry, name="session-retry"),
    path("compactions/<int:compaction_id>/revert/", actions.compaction_revert, name="compaction-revert"),
    path("search/", search.search_page, name="search"),
    path("messages/<int:message_id>/", views.message_detail, name="message"),
    path("messages/<int:message_id>/original/", views.message_original, name="message-original"),
]
