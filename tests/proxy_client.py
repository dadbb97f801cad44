"""The official SDKs (Anthropic's, OpenAI's) pointed at the proxy of a live test server, as an agent
is, with one addition for tests: each of their calls returns only once ctxweb has recorded the
exchange. The proxy records in the background after the answer is out
(``sessions_app/api/proxy/recorder.py``), and a test reads the database right after a call."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import openai

from sessions_app.api.proxy.recorder import RECORDER


class _Settled(httpx2.HTTPTransport):
    """Closing a response (the SDK does once it has read it) waits for the recorder to be idle. The
    exchange is begun before the proxy answers a byte, so every one this call made is waited for."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        assert isinstance(response.stream, httpx2.SyncByteStream)  # a sync transport's answer
        stream: httpx2.SyncByteStream = response.stream

        class Waiting(httpx2.SyncByteStream):
            def __iter__(self) -> Any:
                yield from stream

            def close(self) -> None:
                stream.close()
                assert RECORDER.idle(), "the proxy's recorder did not settle"

        response.stream = Waiting()
        return response


def proxy_client(live_server: Any, headers: dict[str, str], *, api_key: str = "sk-callers-key") -> anthropic.Anthropic:
    """An SDK client through ``live_server``'s proxy; ``headers`` carry the ctxweb key (and more).
    The ``proxy_clients`` fixture closes the ones a test made (their keep-alive connections would
    outlive the test's database)."""
    return anthropic.Anthropic(
        api_key=api_key,
        base_url=f"{live_server.url}/proxy/anthropic",
        default_headers=headers,
        max_retries=0,
        http_client=httpx2.Client(transport=_Settled()),
    )


def openai_client(
    live_server: Any, headers: dict[str, str], *, api_key: str = "sk-callers-openai-key"
) -> openai.OpenAI:
    """OpenAI's SDK through ``live_server``'s OpenAI proxy, as ``proxy_client``."""
    return openai.OpenAI(
        api_key=api_key,
        base_url=f"{live_server.url}/proxy/openai/v1",
        default_headers=headers,
        max_retries=0,
        http_client=httpx2.Client(transport=_Settled()),
    )


def sdk_reply(client: anthropic.Anthropic, *, stream: bool, **kwargs: Any) -> Any:
    """Ask through the SDK, streamed or not: the model's whole reply (an ``anthropic`` Message)."""
    if stream:
        with client.messages.stream(**kwargs) as events:
            return events.get_final_message()
    return client.messages.create(**kwargs)


def as_kept(reply: Any) -> dict[str, Any]:
    """A reply as an agent keeps it in its history."""
    return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}


def assert_stored_nowhere(secret: str) -> None:
    """``secret`` is in no row of any of ctxweb's tables (a caller's key, a project's key)."""
    import json

    from django.apps import apps

    for model in apps.get_app_config("sessions_app").get_models():
        for row in model._default_manager.values():
            assert secret not in json.dumps(row, default=str), model.__name__


def assert_sessions_read_back(team: Any, api: Any, client: Any) -> None:
    """Every session of the team's project answers every read: the API's and its page."""
    from sessions_app.models import AgentSession

    for session in AgentSession.objects.filter(project=team.project):
        s = f"/api/v1/sessions/{session.pk}"
        reads = ("/", "/status/", "/context/", "/context/?format=openai", "/messages/?state=all", "/history/")
        for path in (f"{s}{read}" for read in reads):
            assert api.get(path).status_code == 200, path
        client.force_login(team.bob.user)
        assert client.get(f"/sessions/{session.pk}/").status_code == 200
        client.logout()
