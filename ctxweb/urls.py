from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from sessions_app.api.mcp import views as mcp_views
from sessions_app.api.proxy import base as proxy_base
from sessions_app.api.proxy import views as proxy_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("sessions_app.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("mcp/", mcp_views.mcp, name="mcp"),
    # Anthropic's paths under a prefix: an SDK's base URL is http://ctxweb/proxy/anthropic.
    path("proxy/anthropic/v1/messages", proxy_views.messages, name="proxy-messages"),
    path("proxy/anthropic/v1/messages/count_tokens", proxy_views.count_tokens, name="proxy-count-tokens"),
    path("proxy/openai/v1/chat/completions", proxy_views.chat_completions, name="proxy-chat-completions"),
    path("proxy/openai/v1/responses", proxy_views.responses, name="proxy-responses"),
    path("proxy/openai/v1/responses/compact", proxy_views.responses_compact, name="proxy-responses-compact"),
    # The bases a client probes, and the dialect's own 404 for any other path under them.
    re_path(r"^proxy/(?P<dialect>anthropic|openai)/?$", proxy_base.base, name="proxy-base"),
    re_path(r"^proxy/(?P<dialect>anthropic|openai)/(?P<rest>.+)$", proxy_base.not_forwarded),
    path("", include("sessions_app.web.urls")),
]

handler404 = "sessions_app.api.errors.page_not_found"  # JSON under /api/, Django's page elsewhere
