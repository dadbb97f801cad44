"""``/metrics``: Prometheus' text format, for the operator's scraper only (docs/OPERATIONS.md).

Off (404) unless ``CTX_METRICS_TOKEN`` or ``CTX_METRICS_ALLOWED_NETWORKS`` is set; then a request needs
the bearer token, or an address in one of the networks (``REMOTE_ADDR``: behind a proxy that is the
proxy's, so allow its address only if the proxy itself restricts /metrics)."""

from __future__ import annotations

import hmac
import ipaddress
from collections import defaultdict
from collections.abc import Iterator

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from sessions_app import metrics
from sessions_app.selectors.ops_metrics import gauges

HELP = {
    "ctxweb_messages_appended_total": "Messages stored by appends (REST, transcript sync, imports).",
    "ctxweb_tokens_ingested_total": "Offline token estimates of the messages stored.",
    "ctxweb_compactions_total": "Compactions finished, by level and outcome (succeeded, failed, skipped, too-large).",
    "ctxweb_summarizer_errors_total": "Errors of the summarizer (the model's API) by kind; transient ones are retried.",
    "ctxweb_webhook_attempts_total": "Webhook delivery attempts, by outcome (delivered, retry, failed).",
    "ctxweb_append_duration_seconds": "Time to store one append (counting, the lock, the insert).",
    "ctxweb_status_duration_seconds": "Time to answer GET /sessions/{id}/status/.",
    "ctxweb_compaction_duration_seconds": "Time a compaction run took, by level (the summary call included).",
}


class RecordedCollector(Collector):
    """The counters and histograms every process records (``sessions_app.metrics``), and gauges read
    from the database now."""

    def collect(self) -> Iterator[Metric]:
        series: dict[str, dict[tuple[tuple[str, str], ...], dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        for key, value in metrics.recorded().items():
            name, labels, part = metrics.parse_key(key)
            series[name][tuple(sorted(labels.items()))][part] = value
        for name, description in HELP.items():
            by_labels = series.get(name, {})
            label_names = sorted({k for pairs in by_labels for k, _ in pairs})
            if name in metrics.BUCKETS:
                histogram = HistogramMetricFamily(name, description, labels=label_names)
                for pairs, parts in sorted(by_labels.items()):
                    values = [value for _, value in pairs]
                    histogram.add_metric(values, _cumulative(name, parts), parts.get("sum", 0.0))
                yield histogram
            else:
                counter = CounterMetricFamily(name.removesuffix("_total"), description, labels=label_names)
                for pairs, parts in sorted(by_labels.items()):
                    counter.add_metric([value for _, value in pairs], parts.get("", 0.0))
                yield counter
        now = gauges()
        yield GaugeMetricFamily(
            "ctxweb_compaction_queue_depth", "Compactions queued, waiting for a worker.", now.queue_depth
        )
        yield GaugeMetricFamily(
            "ctxweb_oldest_queued_compaction_age_seconds",
            "How long the oldest queued compaction has waited (0: none waits).",
            now.oldest_queued_seconds,
        )
        yield GaugeMetricFamily("ctxweb_compactions_running", "Compactions a worker is running now.", now.running)
        sessions = GaugeMetricFamily("ctxweb_sessions", "Active sessions by level.", labels=["level"])
        for level, count in now.sessions_by_level.items():
            sessions.add_metric([level], count)
        yield sessions


def _cumulative(name: str, parts: dict[str, float]) -> list[tuple[str, float]]:
    running, buckets = 0.0, []
    for upper in [*metrics.BUCKETS[name], "+Inf"]:
        label = upper if isinstance(upper, str) else repr(upper)
        running += parts.get(f"bucket:{label}", 0.0)
        buckets.append((label, running))
    return buckets


def _allowed(request: HttpRequest) -> bool:
    token = settings.CTX_METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(
        address in ipaddress.ip_network(net.strip(), strict=False) for net in settings.CTX_METRICS_ALLOWED_NETWORKS
    )


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not settings.CTX_METRICS_TOKEN and not settings.CTX_METRICS_ALLOWED_NETWORKS:
        raise Http404("Metrics are off: set CTX_METRICS_TOKEN or CTX_METRICS_ALLOWED_NETWORKS.")
    if not _allowed(request):
        response = HttpResponse(
            "A bearer token or an allowed address is needed.\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RecordedCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
