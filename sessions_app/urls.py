from django.urls import path

from . import views

app_name = "web"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz/", views.healthz, name="healthz"),
    path("projects/", views.project_list, name="projects"),
    path("projects/<int:project_id>/", views.project_detail, name="project"),
    path("sessions/<int:session_id>/", views.session_detail, name="session"),
]
