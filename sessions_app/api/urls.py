from django.urls import path

from . import views

app_name = "api"

urlpatterns = [
    path("projects/", views.ProjectListCreateApi.as_view(), name="projects"),
    path("projects/<int:project_id>/", views.ProjectDetailApi.as_view(), name="project"),
    path("sessions/", views.SessionListCreateApi.as_view(), name="sessions"),
    path("sessions/import/", views.SessionImportApi.as_view(), name="session-import"),
    path("sessions/<str:session_id>/", views.SessionDetailApi.as_view(), name="session"),
    path("sessions/<str:session_id>/messages/", views.MessageListCreateApi.as_view(), name="session-messages"),
    path("sessions/<str:session_id>/status/", views.SessionStatusApi.as_view(), name="session-status"),
    path("sessions/<str:session_id>/context/", views.SessionContextApi.as_view(), name="session-context"),
    path("models/", views.ModelListApi.as_view(), name="models"),
    path("count_tokens/", views.CountTokensApi.as_view(), name="count-tokens"),
]
