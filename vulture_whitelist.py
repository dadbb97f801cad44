"""Names vulture (``make lint``) can't see used, each with why it stays. Not imported by anything: it
only mentions the names, so vulture counts them as used. Add a name here only with a reason."""

# ruff: noqa: B018  (bare attribute expressions are the point)
# mypy: ignore-errors

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# Keys of STATUS (compaction/status.py) and fields of read records: written by the server and read by
# clients, the pages' templates and the API by name.
_.will_compact
_.token_source
_.active_messages
_.compacted_in_this_step
_.can_continue
_.counted_at
_.expected_error
_.output_tokens  # compaction/transcripts/base.py UsagePoint: recorded per Claude Code response
_.warned  # api/budget_views.py BudgetOut: the schema's fields of a budget, filled by budget_out
_.exceeded

# ctxclient's public API (README, docs, the hook's tests), for callers outside this repository.
_.from_env
_.revert
_.handoff_download

# ctxweb/lockout.py: named by settings.AXES_CLIENT_IP_CALLABLE as a dotted path.
_.client_ip

# ctxweb/cache.py LruLocMemCache: overrides LocMemCache._set, which Django's set/add call.
_._set

# sessions_app/api/auth.py: drf-spectacular calls the extension hook with this parameter name.
_.auto_schema

# Serializer fields: DRF reads them from the class body and answers them by name.
_.file
_.mismatch
_.saved_tokens
_.would_skip
_.strategies
_.continuation
_.downloads
_.fallback_context_window

# DRF fields' messages: Field.__init__ gathers ``default_error_messages`` from every class of the field
# by name (the policy's strictly typed fields, api/serializers.py).
_.default_error_messages

# Model columns: read by the admin, the templates, the serializers and the pruner by name, or kept as
# the record of what happened (who asked, when it started, ended, was reverted or counted).
_.content_hash
_.location
_.requested_by
_.started_at
_.finished_at
_.reverted_at
_.previous_compaction
_.reverted
_.created_by
_.updated_at
_.exact_counted_at
_.received_at

# Forms' and pages' fields the templates read by name.
_.continue_session
_.long
_.hidden

# sessions_app/web/charts.py Chart and Marker: geometry the session chart's template draws by name.
_.y_before
_.y_after
_.plot_left
_.plot_right
_.plot_top
_.plot_width
_.plot_bottom
_.y_ticks
_.x_ticks
_.rows_step
_.last_used

# sessions_app/web/dashboard_chart.py Bar and DailyChart: geometry the dashboard's template draws by name.
_.ingested_y
_.ingested_h
_.saved_x
_.saved_y
_.saved_h
_.show_label
_.ticks
_.total_ingested
_.total_saved

# sessions_app/web/request_chart.py RequestBar and RequestChart: geometry the session page's
# _requests.html draws by name.
_.context_y
_.context_h
_.cached_y
_.cached_h
_.cost_h
_.context_ticks
_.cost_ticks
_.context_description
_.cost_description

# ModelProfile's prices: read by name in selectors/usage.py's values_list; edited in admin
# (ModelProfileAdmin.list_editable, a Django admin option).
_.input_price_per_mtok
_.cache_write_price_per_mtok
_.cache_read_price_per_mtok
_.output_price_per_mtok
_.list_editable

# sessions_app/models/webhooks.py WebhookDelivery: columns written through queryset .update(**fields)
# and filters by name (services/webhook_delivery.py), read by the API's serializer and the page.
_.next_attempt_at
_.claimed_at
_.last_status_code
_.delivered_at

# ctxweb/logs.py: named by settings.LOGGING as a dotted path (CTX_LOG_FORMAT=json).
_.JsonFormatter
# sessions_app/web/metrics.py RecordedCollector.collect: what prometheus_client calls at scrape time.
_.collect
# sessions_app/metrics.reset: the tests start from nothing (it drops every recorded series).
_.reset
# sessions_app/api/proxy_recorder.Recorder.idle: the tests' SDK client waits on it after each call
# (tests/proxy_client.py), so a test reads what the proxy recorded in the background.
_.idle
# sessions_app/services/exact_usage.forget_calibration_intervals: each test starts with no lesson remembered
# (tests/conftest.py), as its cache starts cleared.
_.forget_calibration_intervals

# Django admin options, read by name (sessions_app/admin.py, sessions_app/web/admin_lists.py).
_.show_full_result_count
_.parameter_name
_.search_help_text
# ctxweb/celery.py: named by settings.CELERY_TASK_ROUTES and read by Celery's Django fixup.
_.route_by_kind
# ctxweb/celery.py: a receiver of Celery's task_prerun and task_postrun signals.
_._database_connections_as_in_a_request
# ctxweb/celery.py: a receiver of Celery's task_postrun signal (metrics sent before a pool process may _exit).
_._metrics_sent
# ctxweb/celery.py: a receiver of Celery's worker_init signal.
_._warm_up

# sessions_app/services/demo.py: Django's User field, read by admin's permission checks.
_.is_superuser

# sessions_app/services/webhook_http.py: the socket and raw-reader methods http.client and io call.
_.readable
_.readinto
_.makefile
# ctxclient/deadline.py: the handler methods urllib's OpenerDirector calls by scheme.
_.http_open
_.https_open

# GET /models/'s schema (api/serializers.ModelOut, ModelListOut): fields the view's dict fills by name.
_.long_context_window
_.data_package
# selectors/prices.price_of: the one place a usage becomes dollars, for the spend per request (issue 31)
# and the tests; nothing in the service calls it yet.
_.price_of
# sessions_app/models/projects.py Project: a project's sealed provider keys, read and written by the
# column names services/projects.py _KEY_FIELDS gives per provider.
_.upstream_api_key
_.openai_api_key

# The policy's thresholds in tokens (compaction/policy.py Policy, the CompactionPolicy model): read and
# written by name through TOKEN_FIELDS, the model's ENGINE_FIELDS, the forms and the API.
_.remind_tokens
_.compact_tokens
_.summarize_tokens
_.handoff_tokens
_.target_after_tokens

# sessions_app/web/forms.py PolicyForm: Django's Form reads field_order from the class.
_.field_order

# ProviderRequest's columns, the serializer's fields and Spend's sums (sessions_app/models/requests.py,
# api/request_views.py, selectors/spend.py): read by name (DRF's Meta.fields, the aggregate's keywords).
_.cache_creation_input_tokens
_.cache_read_input_tokens
_.cost_usd
_.cache_hit_ratio

# AgentSession.spawned_by (sessions_app/models/sessions.py, api/serializers.SessionOut): a sub-agent's
# session's link to the session that started it, read by name (spawned_by_id, the ORM's lookups, DRF).
_.spawned_by

# services/spend_rollup.request_store: a request's row stored as given, with its saving and its rollup
# bucket; what tests and scripts that make rows of their own call instead of ProviderRequest.objects.create.
_.request_store

# templatetags/search_marks.highlight: a template filter, used by name in message.html.
_.highlight

# ctxweb/cache.ResilientRedisCache._class: the client class Django's RedisCache builds its client from (read by Django).
_._class

# selectors/sql_rows.insert_new: Django's own flag on a model instance's state (read by save and the admin).
_.adding

# selectors/sql_rows.prepared_cursor: psycopg's connection setting (read by psycopg when it executes).
_.prepare_threshold
