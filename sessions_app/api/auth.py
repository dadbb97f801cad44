from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from sessions_app.services import keys

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL


class AuthenticatedRequest(Request):
    """What an API view's handler is given: every view is behind ``IsAuthenticated`` (the
    ``DEFAULT_PERMISSION_CLASSES`` of ``REST_FRAMEWORK``; no view sets its own), so the user is signed
    in, with an API key or a session, and never ``AnonymousUser``. For annotations only: DRF makes
    the request."""

    user: User


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <api key>``; keys are per user, hashed at rest, revocable."""

    keyword = "bearer"

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword:
            return None
        raw = raw.strip()
        if not raw:
            raise exceptions.AuthenticationFailed("Bearer token missing.", code="invalid_api_key")
        key = keys.apikey_authenticate(raw)
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.", code="invalid_api_key")
        return key.user, key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "sessions_app.api.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A ctxweb API key (ctx_…)."}
