from django.urls import path

from . import budget_views as bv
from . import compaction_views as cv
from . import dashboard_views as dv
from . import history_views as hv
from . import policy_views as pv
from . import request_views as rv
from . import search_views as srv
from . import spend_views as sv
from . import tool_views as tlv
from . import transcript_views as tv
from . import views
from . import webhook_views as wv

app_name = "api"

urlpatterns = [
    path("projects/", views.ProjectListCreateApi.as_view(), name="projects"),
    path("projects/<int:project_id>/", views.ProjectDetailApi.as_view(), name="project"),
    path("projects/<int:project_id>/dashboard/", dv.ProjectDashboardApi.as_view(), name="project-dashboard"),
    path("projects/<int:project_id>/spend/", sv.ProjectSpendApi.as_view(), name="project-spend"),
    path("projects/<int:project_id>/budgets/", bv.ProjectBudgetsApi.as_view(), name="project-budgets"),
    path("projects/<int:project_id>/budgets/<str:budget_id>/", bv.BudgetDetailApi.as_view(), name="project-budget"),
    path("projects/<int:project_id>/requests/", rv.ProjectRequestsApi.as_view(), name="project-requests"),
    path("projects/<int:project_id>/policy/", pv.ProjectPolicyApi.as_view(), name="project-policy"),
    path("projects/<int:project_id>/webhooks/", wv.ProjectWebhooksApi.as_view(), name="project-webhooks"),
    path("webhooks/<str:webhook_id>/", wv.WebhookDetailApi.as_view(), name="webhook"),
    path("webhooks/<str:webhook_id>/test/", wv.WebhookTestApi.as_view(), name="webhook-test"),
    path("webhooks/<str:webhook_id>/deliveries/", wv.WebhookDeliveriesApi.as_view(), name="webhook-deliveries"),
    path("sessions/", views.SessionListCreateApi.as_view(), name="sessions"),
    path("sessions/import/", views.SessionImportApi.as_view(), name="session-import"),
    path("sessions/transcript/", tv.SessionTranscriptApi.as_view(), name="session-transcript"),
    path("sessions/<str:session_id>/", views.SessionDetailApi.as_view(), name="session"),
    path("sessions/<str:session_id>/messages/", views.MessageListCreateApi.as_view(), name="session-messages"),
    path("sessions/<str:session_id>/status/", views.SessionStatusApi.as_view(), name="session-status"),
    path("sessions/<str:session_id>/history/", hv.SessionHistoryApi.as_view(), name="session-history"),
    path("sessions/<str:session_id>/requests/", rv.SessionRequestsApi.as_view(), name="session-requests"),
    path("sessions/<str:session_id>/spend/", rv.SessionSpendApi.as_view(), name="session-spend"),
    path("sessions/<str:session_id>/tools/", tlv.SessionToolsApi.as_view(), name="session-tools"),
    path("sessions/<str:session_id>/context/", views.SessionContextApi.as_view(), name="session-context"),
    path("sessions/<str:session_id>/compactions/", cv.SessionCompactionsApi.as_view(), name="session-compactions"),
    path("sessions/<str:session_id>/checkpoints/", cv.SessionCheckpointsApi.as_view(), name="session-checkpoints"),
    path("sessions/<str:session_id>/handoff/", cv.SessionHandoffApi.as_view(), name="session-handoff"),
    path("compactions/<str:compaction_id>/", cv.CompactionDetailApi.as_view(), name="compaction"),
    path("compactions/<str:compaction_id>/revert/", cv.CompactionRevertApi.as_view(), name="compaction-revert"),
    path("checkpoints/<str:checkpoint_id>/", cv.CheckpointDetailApi.as_view(), name="checkpoint"),
    path("handoffs/<str:handoff_id>/", cv.HandoffDetailApi.as_view(), name="handoff"),
    path("handoffs/<str:handoff_id>/download/", cv.HandoffDownloadApi.as_view(), name="handoff-download"),
    path("search/", srv.SearchApi.as_view(), name="search"),
    path("models/", views.ModelListApi.as_view(), name="models"),
    path("count_tokens/", views.CountTokensApi.as_view(), name="count-tokens"),
]
