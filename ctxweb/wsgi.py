import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
application = get_wsgi_application()


def _warm_up() -> None:
    """Load now what each worker's first request would otherwise load while its caller waits (~1 s):
    the URL configuration with every view module it imports (the anthropic SDK among them), and the
    offline tokenizer's encoding."""
    from django.urls import get_resolver

    from sessions_app.engine import offline_tokenizer

    get_resolver().url_patterns  # noqa: B018 (the property imports the views)
    offline_tokenizer().count_text("warm up")


_warm_up()
# What is loaded by now (Django, the SDKs, the tokenizer: ~200,000 objects) lives as long as the
# process: out of the collector's sight, a full collection takes ~7 ms instead of ~125 ms, which
# fell on whichever request was running (one in a few thousand messages ingested).
gc.freeze()
