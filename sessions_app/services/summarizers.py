"""Which summarizer a project's summaries are written by: a model of its policy's provider, with the
project's own key for that provider (sealed; ``projects.project_provider_key``), else the server's
(``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``); without either, or when the policy says ``offline``,
the offline extractive summarizer. Reads only."""

from __future__ import annotations

from dataclasses import dataclass

from compaction.policy import SUMMARIZER_PROVIDERS, Policy
from compaction.summarize import Summarizer
from sessions_app.engine import model_summarizer, offline_summarizer, server_api_key
from sessions_app.models import Project
from sessions_app.services.projects import project_provider_key

# Starts the note a compaction carries when the policy's model has no key to be called with.
NO_KEY_NOTE = "No API key for the summarizer model"


@dataclass(frozen=True)
class SummarizerChoice:
    summarizer: Summarizer
    note: str = ""  # why the offline summarizer stands in for the policy's model; "" when it doesn't


def summarizer_choice(project: Project, policy: Policy) -> SummarizerChoice:
    """The summarizer for ``project``'s summaries under ``policy``, and a note when a model was asked
    for but there is no key to call it with."""
    provider = policy.summarizer_provider
    if provider not in ("anthropic", "openai"):
        return SummarizerChoice(offline_summarizer(policy))
    key = project_provider_key(project, provider) or server_api_key(provider)
    if key:
        return SummarizerChoice(model_summarizer(policy, api_key=key))
    label = SUMMARIZER_PROVIDERS[provider]
    note = (
        f"{NO_KEY_NOTE} ({provider}:{policy.summarizer_model}): neither the project nor the server has an "
        f"{label} API key, so the offline extractive summary was used."
    )
    return SummarizerChoice(offline_summarizer(policy), note)


def summarizer_key_source(project: Project, policy: Policy) -> str:
    """Whose key the policy's summarizer model is called with: ``project``, ``server``, ``none`` (the
    offline summarizer stands in), or ``offline`` (the policy asks for no model). The settings page's line."""
    provider = policy.summarizer_provider
    if provider not in ("anthropic", "openai"):
        return "offline"
    if project_provider_key(project, provider):
        return "project"
    return "server" if server_api_key(provider) else "none"
