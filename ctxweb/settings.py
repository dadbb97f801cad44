"""ctxweb settings: one module, every knob from the environment.

With no environment at all this is the embedded mode: a SQLite file, Celery tasks run in-process,
a local-memory cache and the offline summarizer. DATABASE_URL / REDIS_URL / ANTHROPIC_API_KEY turn
on Postgres, Redis-backed Celery and cache, and exact counts. docs/CONFIGURATION.md lists them all.
"""

import ipaddress
from pathlib import Path

import environ  # type: ignore[import-untyped]  # django-environ ships no type hints, and no stubs exist
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("DEBUG", default=False)
_DEV_SECRET = "dev-only-insecure-secret-key-change-me-0123456789abcdefghijklmnopqrstuvwxyz"
SECRET_KEY = env.str("SECRET_KEY", default=_DEV_SECRET)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "sessions_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "sessions_app.middleware.DatabaseUnavailableMiddleware",
    "sessions_app.middleware.ApiBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "ctxweb.urls"
WSGI_APPLICATION = "ctxweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "sessions_app.web.context_processors.projects",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
# The embedded default, not a deployment (no DATABASE_URL; DEBUG on or the development secret key,
# as `make run` has it): only here does `ctx demo` make its demo / demo user an admin.
CTX_DEMO_ADMIN = not env.str("DATABASE_URL", default="") and (DEBUG or SECRET_KEY == _DEV_SECRET)
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's, without the health check of a connection that answered under a second ago (ctxweb/postgres).
    DATABASES["default"]["ENGINE"] = "ctxweb.postgres"
# PostgreSQL: the statements every request sends, written once (selectors/sql_rows.py), are prepared
# on each connection: Postgres parses and plans each once, not on every request. Off behind a pooler
# in transaction mode that doesn't carry prepared statements (PgBouncer before 1.22, or without
# max_prepared_statements): docs/SCALING.md.
CTX_DB_PREPARED_STATEMENTS = env.bool("CTX_DB_PREPARED_STATEMENTS", default=True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several threads (runserver, in-process tasks) share one file: wait for the lock, don't fail.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
# Anthropic's exact counts, keyed by a hash of the whole request (docs/TOKEN_COUNTING.md), have a cache
# of their own: entries expire after CTX_EXACT_COUNT_CACHE_SECONDS; in local memory (no Redis) at most
# CTX_EXACT_COUNT_CACHE_ENTRIES are kept, the least recently used going first.
CTX_EXACT_COUNT_CACHE_SECONDS = env.int("CTX_EXACT_COUNT_CACHE_SECONDS", default=3600)
CTX_EXACT_COUNT_CACHE_ENTRIES = env.int("CTX_EXACT_COUNT_CACHE_ENTRIES", default=1000)
if REDIS_URL:
    # Short socket timeouts and a backend that degrades: a Redis outage slows nothing and fails nothing.
    _REDIS_OPTIONS = {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}
    CACHES = {
        "default": {"BACKEND": "ctxweb.cache.ResilientRedisCache", "LOCATION": REDIS_URL, "OPTIONS": _REDIS_OPTIONS},
        # A prefix of its own, so its size is a count of its own keys.
        "exact_counts": {
            "BACKEND": "ctxweb.cache.ResilientRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "ctx-exact",
            "TIMEOUT": CTX_EXACT_COUNT_CACHE_SECONDS,
            "OPTIONS": _REDIS_OPTIONS,
        },
    }
else:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "exact_counts": {
            "BACKEND": "ctxweb.cache.LruLocMemCache",
            "LOCATION": "ctx-exact-counts",
            "TIMEOUT": CTX_EXACT_COUNT_CACHE_SECONDS,
            "OPTIONS": {"MAX_ENTRIES": CTX_EXACT_COUNT_CACHE_ENTRIES},
        },
    }

# Celery: Redis as broker when configured; otherwise tasks run in-process (embedded mode).
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "socket_connect_timeout": 1, "socket_timeout": 2}
# Publishing gives up fast when the broker is down: the request answers, the work stays recorded as
# queued in the database and is re-sent when the broker is back (see CTX_REQUEUE_AFTER_SECONDS).
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CTX_TASK_SOFT_TIME_LIMIT", default=120)
CELERY_TASK_TIME_LIMIT = env.int("CTX_TASK_TIME_LIMIT", default=180)
CELERY_TIMEZONE = "UTC"
# One queue per kind of work, so each gets workers and a concurrency of its own (docs/SCALING.md):
# counting (exact counts, short API calls), compaction (summaries, seconds each), maintenance (beat's
# jobs and webhook deliveries). A worker started without -Q serves all three. The prefix lets several
# installations (or test runs) share one Redis.
CTX_QUEUE_PREFIX = env.str("CTX_QUEUE_PREFIX", default="")
CTX_QUEUES = {kind: CTX_QUEUE_PREFIX + kind for kind in ("counting", "compaction", "maintenance")}
CELERY_TASK_QUEUES = [Queue(name) for name in CTX_QUEUES.values()]
CELERY_TASK_DEFAULT_QUEUE = CTX_QUEUES["maintenance"]
CELERY_TASK_ROUTES = ("ctxweb.celery.route_by_kind",)
# Celery's Django fixup closes the database connection before and after every task, so each task
# paid a new connection (a Postgres backend started and torn down: ~10 % of a worker's time under
# load). ctxweb/celery.py keeps connections as a web request does instead (CONN_MAX_AGE, health checks).
CELERY_DB_REUSE_MAX = 2**31

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Production (docs/CONFIGURATION.md) runs collectstatic and sets CTX_MANIFEST_STATIC=1 for hashed,
# compressed files; otherwise whitenoise serves straight from the source folders.
CTX_MANIFEST_STATIC = env.bool("CTX_MANIFEST_STATIC", default=False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if CTX_MANIFEST_STATIC
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not CTX_MANIFEST_STATIC
STATIC_ROOT = BASE_DIR / "staticfiles" if CTX_MANIFEST_STATIC else None

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/projects/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# HTTPS deployments (docs/CONFIGURATION.md): one switch for the cookie and transport settings
# `manage.py check --deploy` asks for.
CTX_HTTPS = env.bool("CTX_HTTPS", default=False)
SECURE_SSL_REDIRECT = CTX_HTTPS
SESSION_COOKIE_SECURE = CTX_HTTPS
CSRF_COOKIE_SECURE = CTX_HTTPS
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000 if CTX_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = CTX_HTTPS
# The preload directive alone changes nothing until the domain is submitted to hstspreload.org.
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=CTX_HTTPS)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env.bool("CTX_BEHIND_PROXY", default=False) else None
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# Limits on what one request may carry.
CTX_MAX_BODY_BYTES = env.int("CTX_MAX_BODY_BYTES", default=16 * 1024 * 1024)
CTX_MAX_BATCH = env.int("CTX_MAX_BATCH", default=1000)
# Messages one count_tokens request may hold (POST /count_tokens/, ctx count): counting is in the request.
CTX_MAX_COUNT_MESSAGES = env.int("CTX_MAX_COUNT_MESSAGES", default=10_000)
CTX_MAX_IMPORT_BYTES = env.int("CTX_MAX_IMPORT_BYTES", default=64 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = CTX_MAX_BODY_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024

# Anthropic: exact counts and LLM summaries when a key is set.
ANTHROPIC_API_KEY = env.str("ANTHROPIC_API_KEY", default="")
ANTHROPIC_BASE_URL = env.str("ANTHROPIC_BASE_URL", default="") or None
ANTHROPIC_TIMEOUT = env.float("ANTHROPIC_TIMEOUT", default=30.0)
ANTHROPIC_MAX_RETRIES = env.int("ANTHROPIC_MAX_RETRIES", default=2)
# OpenAI: LLM summaries for projects whose policy's summarizer_provider is openai and that have no key
# of their own. The base URL is the SDK's (it ends in /v1); empty: OpenAI's own.
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="") or None
OPENAI_TIMEOUT = env.float("OPENAI_TIMEOUT", default=30.0)
# The Anthropic-compatible proxy (/proxy/anthropic/v1/…, docs/PROXY.md): where it forwards, how long it
# waits for an answer (a long stream included), and the largest request it takes (Anthropic's own: 32 MB).
CTX_PROXY_UPSTREAM_URL = env.str("CTX_PROXY_UPSTREAM_URL", default="https://api.anthropic.com")
CTX_PROXY_OPENAI_URL = env.str("CTX_PROXY_OPENAI_URL", default="https://api.openai.com")
CTX_PROXY_TIMEOUT = env.float("CTX_PROXY_TIMEOUT", default=600.0)
CTX_PROXY_MAX_BODY_BYTES = env.int("CTX_PROXY_MAX_BODY_BYTES", default=32 * 1024 * 1024)
# The largest request, and answer, the proxy records (it forwards larger ones whole): what one exchange
# costs a web worker to record grows with it. A larger request is noted on its session; a larger
# answer is recorded up to here, with a note.
CTX_PROXY_RECORD_MAX_BYTES = env.int("CTX_PROXY_RECORD_MAX_BYTES", default=4 * 1024 * 1024)
# The calibration learns from one (estimate, real usage) pair per model this often (each is a write of
# the model's profile row, and moves every figure worked out from its factor).
CTX_PROXY_CALIBRATION_SECONDS = env.int("CTX_PROXY_CALIBRATION_SECONDS", default=60)
# Threads per web process that record an exchange once its answer is out (0: the request's own thread,
# which then serves the connection's next request only after), and how many exchanges each may queue.
CTX_PROXY_RECORDERS = env.int("CTX_PROXY_RECORDERS", default=2)
# Fernet keys (comma-separated; the first seals, all open) for secrets ctxweb reads back: a project's
# upstream API key. Empty: one derived from SECRET_KEY (services/sealing.py).
CTX_ENCRYPTION_KEYS = env.str("CTX_ENCRYPTION_KEYS", default="")
CTX_PROXY_RECORD_QUEUE = env.int("CTX_PROXY_RECORD_QUEUE", default=256)
# Where people reach this service; handoff documents name it in their "how to resume" footer.
CTX_PUBLIC_URL = env.str("CTX_PUBLIC_URL", default="http://127.0.0.1:8000").rstrip("/")

# Periodic jobs (``make beat``) live in the database (django-celery-beat), so admins edit them in
# Django admin → Periodic tasks. Migration 0005 seeds them: reclaiming stuck compactions (every
# minute), expiring revert backups (hourly), pruning inactive sessions and context documents (daily).
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Don't ask for an exact count more often than this per session while messages stream in.
CTX_EXACT_COUNT_DEBOUNCE_SECONDS = env.int("CTX_EXACT_COUNT_DEBOUNCE_SECONDS", default=5)
CTX_DEFAULT_POLICY_PRESET = env.str("CTX_DEFAULT_POLICY_PRESET", default="default")
# Task retries back off from this many seconds, doubling (2, 4, 8, 16 s by default; at most 60 s).
CTX_RETRY_BACKOFF_BASE = env.float("CTX_RETRY_BACKOFF_BASE", default=2.0)
# A compaction still queued after this long (the broker was down when it was queued) is sent again.
CTX_REQUEUE_AFTER_SECONDS = env.int("CTX_REQUEUE_AFTER_SECONDS", default=120)
# STATUS warns when background work (a queued compaction, an exact count) has waited this long.
CTX_PENDING_WARNING_SECONDS = env.int("CTX_PENDING_WARNING_SECONDS", default=60)

# Webhooks (docs/WEBHOOKS.md): attempts per delivery, the first retry's delay (doubling after), the
# request timeout, and whether a webhook may call a private, loopback or link-local address (off in
# production: a project admin must not reach the internal network through ctxweb; on with DEBUG).
CTX_WEBHOOK_MAX_ATTEMPTS = env.int("CTX_WEBHOOK_MAX_ATTEMPTS", default=6)
CTX_WEBHOOK_BACKOFF_SECONDS = env.float("CTX_WEBHOOK_BACKOFF_SECONDS", default=10.0)
CTX_WEBHOOK_TIMEOUT_SECONDS = env.float("CTX_WEBHOOK_TIMEOUT_SECONDS", default=5.0)
CTX_WEBHOOK_ALLOW_PRIVATE = env.bool("CTX_WEBHOOK_ALLOW_PRIVATE", default=DEBUG)

# Prometheus metrics at /metrics (docs/OPERATIONS.md): off (404) unless a bearer token or allowed
# networks are set. Counters live in Redis under CTX_METRICS_KEY, shared by web and worker processes.
CTX_METRICS_TOKEN = env.str("CTX_METRICS_TOKEN", default="")
CTX_METRICS_ALLOWED_NETWORKS = env.list("CTX_METRICS_ALLOWED_NETWORKS", default=[])
try:
    _metric_networks = [ipaddress.ip_network(n.strip(), strict=False) for n in CTX_METRICS_ALLOWED_NETWORKS]
except ValueError as exc:
    raise ImproperlyConfigured(f"CTX_METRICS_ALLOWED_NETWORKS: {exc}") from None
CTX_METRICS_KEY = env.str("CTX_METRICS_KEY", default="ctxweb:metrics")

# Rate limits ("N/second|minute|hour|day"; empty: none). 429 with Retry-After when exceeded.
CTX_RATE_LIMIT_KEY = env.str("CTX_RATE_LIMIT_KEY", default="1200/minute")
CTX_RATE_LIMIT_USER = env.str("CTX_RATE_LIMIT_USER", default="3000/minute")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "sessions_app.api.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": [
        "sessions_app.api.throttling.ApiKeyRateThrottle",
        "sessions_app.api.throttling.UserRateThrottle",
    ],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "sessions_app.api.parsers.JSONParser",  # refuses what storage can't hold
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "sessions_app.api.schema.AutoSchema",  # + the documented 4xx answers
    "EXCEPTION_HANDLER": "sessions_app.api.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "sessions_app.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # ?format= belongs to our endpoints (context, downloads), not to DRF's renderer switch.
    "URL_FORMAT_OVERRIDE": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "ctxweb API",
    "DESCRIPTION": "Keep LLM agent sessions inside their context window: ingest, count, compact, hand off.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI's assets come from the sidecar package: nothing is loaded from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The API docs' sections, in this order; sessions_app/api/schema.py puts each operation in one.
    "TAGS": [
        {"name": "projects", "description": "A team's space: its members and roles, its sessions."},
        {
            "name": "sessions",
            "description": "An agent's conversation: create, list, its STATUS and model-ready context.",
        },
        {
            "name": "messages",
            "description": "Append a session's messages (idempotent by client_id) and page through them.",
        },
        {"name": "tokens", "description": "Count an Anthropic count_tokens body offline; the models' context windows."},
        {"name": "compactions", "description": "Compact a session (or preview it), its compaction history, revert."},
        {"name": "checkpoints", "description": "The structured summaries compactions write."},
        {
            "name": "search",
            "description": "Everything sessions held: messages in every state, what compactions replaced, checkpoints "
            "and handoffs (docs/SEARCH.md). Agents ask through the MCP server at /mcp/.",
        },
        {"name": "handoffs", "description": "Handoff documents a fresh session starts from, and their downloads."},
        {
            "name": "import",
            "description": "Recorded transcripts: a one-shot import, or a transcript synced while it grows.",
        },
        {
            "name": "history",
            "description": "The team's view over time: a session's context history, a project's dashboard.",
        },
        {
            "name": "spend",
            "description": "What proxied requests used and cost: per request (tokens by kind, latency), per "
            "session and per project by day, person, API key or model (JSON or CSV), with what compaction saved; "
            "a session's tokens by tool; budgets per project or key, per day or month.",
        },
        {"name": "policy", "description": "A project's compaction policy: thresholds and presets (project admins)."},
        {"name": "webhooks", "description": "Be told when a level changes or a compaction ends; deliveries and tests."},
    ],
    "ENUM_NAME_OVERRIDES": {
        "TokenSourceEnum": ["exact", "estimate"],
        "SessionStatusEnum": "sessions_app.models.SessionStatus",
        "CompactionStatusEnum": "sessions_app.models.CompactionStatus",
        "CompactionLevelEnum": "compaction.types.level_choices",
        "UsageLevelEnum": ["ok", "remind", "compact", "summarize", "handoff"],
        "WebhookFormatEnum": "sessions_app.models.WebhookFormat",
        "RequestSourceEnum": "sessions_app.models.RequestSource",
    },
}

# CTX_LOG_FORMAT=json: one JSON object a line, with an event's figures as keys (docs/OPERATIONS.md).
CTX_LOG_FORMAT = env.str("CTX_LOG_FORMAT", default="plain")
if CTX_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured("CTX_LOG_FORMAT is plain or json.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "ctxweb.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": CTX_LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# ----------------------------------------------------------------------------- sign-in lockout and CSP
# Both described in docs/CONFIGURATION.md ("Sign-in lockout", "Content-Security-Policy").
from datetime import timedelta  # noqa: E402

from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE  # noqa: E402

INSTALLED_APPS += ["axes", "csp"]
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1, "csp.middleware.CSPMiddleware")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")  # last, as django-axes asks: it turns a lockout into a page

# django-axes: after CTX_LOGIN_FAILURE_LIMIT failed sign-ins for one username from one address, that
# pair is refused (429, registration/locked_out.html) until CTX_LOGIN_LOCKOUT_MINUTES pass without
# another failed attempt. /accounts/login/ and /admin/login/ both authenticate through it; API keys don't.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_ENABLED = env.bool("CTX_LOGIN_LOCKOUT", default=True)
AXES_FAILURE_LIMIT = env.int("CTX_LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("CTX_LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]  # one address can't lock a user out everywhere
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_DISABLE_ACCESS_LOG = True  # keep failed attempts only (they expire); successful sign-ins aren't logged
CTX_BEHIND_PROXY = env.bool("CTX_BEHIND_PROXY", default=False)
AXES_CLIENT_IP_CALLABLE = "ctxweb.lockout.client_ip"

# django-csp: scripts and <style> elements only from this origin or with the response's nonce (the
# API docs page's inline init script and style carry it); style *attributes* are allowed, for the
# widths of the usage bars. htmx's own injected <style> is switched off in base.html.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "style-src-attr": [UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "upgrade-insecure-requests": CTX_HTTPS,
    },
}
# Swagger UI: no badge image fetched from validator.swagger.io (the policy would block it anyway).
SPECTACULAR_SETTINGS["SWAGGER_UI_SETTINGS"] = {"deepLinking": True, "validatorUrl": None}
# ----------------------------------------------------------------------------- end: sign-in lockout and CSP
