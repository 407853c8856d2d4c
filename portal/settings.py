"""The portal's one settings module, read from the environment (and an optional `.env`).

Every variable is listed in docs/settings.md (the README keeps the common ones). A bad value
stops start-up with ImproperlyConfigured naming the variable.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from django.utils.translation import gettext_lazy as _
from dotenv import load_dotenv

from portal.env import (
    celery_redis_url,
    check_redis_url,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_str,
    env_weights,
    load_secret_key,
    parse_database_url,
    read_env_file,
    read_key_list,
)
from providers.config import load_roles

BASE_DIR = Path(__file__).resolve().parent.parent

# An optional .env file; real environment variables win over it.
load_dotenv(env_str("PORTAL_ENV_FILE") or BASE_DIR / ".env", override=False)

# Everything the portal writes at run time lives here: secret key, media, embedded services.
VAR_DIR = Path(env_str("PORTAL_VAR_DIR") or BASE_DIR / "var").resolve()

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = load_secret_key(VAR_DIR)
# Whether it came from the environment (else generated into var/secret_key, per machine).
SECRET_KEY_FROM_ENV = bool(env_str("SECRET_KEY"))
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Addresses of the embedded services that `manage.py up` started, for commands run beside it.
EMBEDDED_ENV_FILE = VAR_DIR / "run" / "services.env"
_embedded = read_env_file(EMBEDDED_ENV_FILE)
DATABASE_URL = env_str("DATABASE_URL") or _embedded.get(
    "DATABASE_URL", f"postgresql://postgres@/portal?host={VAR_DIR / 'pg'}"
)
REDIS_URL = check_redis_url(
    env_str("REDIS_URL") or _embedded.get("REDIS_URL", f"unix://{VAR_DIR / 'run' / 'redis.sock'}")
)
# True when the address came from `up`'s embedded services rather than the environment.
DATABASE_URL_SOURCE = "DATABASE_URL" if env_str("DATABASE_URL") else "embedded"
REDIS_URL_SOURCE = "REDIS_URL" if env_str("REDIS_URL") else "embedded"

# Workers and commands keep their connection DB_CONN_MAX_AGE seconds; the web process keeps
# none (portal.db.for_the_web: under ASGI every request thread held its own).
DATABASES = {"default": parse_database_url(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "portal.User"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "audit",
    "portal",
    "knowledge",
    "ingestion",
    "assistant",
    "quality",
    "sources",
    "operations",
]

MIDDLEWARE = [
    # First: it times the others and sees the response the client gets (/metrics).
    "operations.instrumentation.RequestMetrics",
    "django.middleware.security.SecurityMiddleware",
    "portal.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    # Every error status under /api/ and /v1/ as JSON (portal/views.py json_error).
    "portal.views.JsonErrors",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "audit.log.AuditMiddleware",
]

ROOT_URLCONF = "portal.urls"
ASGI_APPLICATION = "portal.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.portal",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]

# Accounts (django-allauth): email + password; signup can be switched off.
SIGNUP_ENABLED = env_bool("PORTAL_SIGNUP", True)
ACCOUNT_ADAPTER = "portal.adapters.AccountAdapter"
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = env_choice("PORTAL_EMAIL_VERIFICATION", "none", ("none", "optional", "mandatory"))
ACCOUNT_UNIQUE_EMAIL = True
# Sign-up never tells whether an address has an account: its owner is mailed instead, and a
# new address is confirmed by mail before it logs in, whatever PORTAL_EMAIL_VERIFICATION says
# (portal/adapters.py: SignupForm, EmailVerificationStage).
ACCOUNT_PREVENT_ENUMERATION = True
ACCOUNT_FORMS = {"signup": "portal.adapters.SignupForm"}
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True  # the browser that signed up (within 15 minutes) is let in
ACCOUNT_LOGOUT_ON_GET = False
LOGIN_REDIRECT_URL = "dashboard"
LOGIN_URL = "account_login"
SOCIALACCOUNT_ADAPTER = "portal.adapters.SocialAccountAdapter"
# One OpenID Connect provider (Keycloak, Authentik, Azure AD, Google...) when configured.
OIDC_SERVER_URL = env_str("PORTAL_OIDC_SERVER_URL")
SOCIALACCOUNT_PROVIDERS: dict[str, dict[str, object]] = {}
if OIDC_SERVER_URL:
    SOCIALACCOUNT_PROVIDERS["openid_connect"] = {
        "APPS": [
            {
                "provider_id": env_str("PORTAL_OIDC_ID", "oidc"),
                "name": env_str("PORTAL_OIDC_NAME", "Single sign-on"),
                "client_id": env_str("PORTAL_OIDC_CLIENT_ID"),
                "secret": env_str("PORTAL_OIDC_CLIENT_SECRET"),
                "settings": {"server_url": OIDC_SERVER_URL},
            }
        ]
    }
    if not SOCIALACCOUNT_PROVIDERS["openid_connect"]["APPS"][0]["client_id"]:  # type: ignore[index]
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("PORTAL_OIDC_CLIENT_ID must be set when PORTAL_OIDC_SERVER_URL is.")

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "portal@localhost")

# The first admin account `manage.py up` creates when there is none.
ADMIN_EMAIL = env_str("PORTAL_ADMIN_EMAIL", "admin@localhost")
ADMIN_PASSWORD = env_str("PORTAL_ADMIN_PASSWORD")
# The address people reach the portal at: links in mails (invitations) start with it.
PORTAL_URL = env_str("PORTAL_URL", "http://localhost:8000")
# Team invitations stay open this many days (an admin can send one again).
INVITATION_DAYS = env_int("PORTAL_INVITATION_DAYS", 14, minimum=1)
# Audit entries older than this many days are deleted by beat (0: kept for ever).
AUDIT_DAYS = env_int("PORTAL_AUDIT_DAYS", 365)

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env_str("TIME_ZONE", "UTC")
FORMAT_MODULE_PATH = ["portal.formats"]  # one form of dates in every page and language
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT") or VAR_DIR / "static").resolve()
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing one
# Without collectstatic (one-laptop mode), WhiteNoise serves straight from the finders.
WHITENOISE_USE_FINDERS = True
MEDIA_URL = "/media/"
MEDIA_ROOT = Path(env_str("MEDIA_ROOT") or VAR_DIR / "media").resolve()
# Where stored files live (originals, page renders, page pictures): `local` under MEDIA_ROOT
# (one machine), or `s3`, any S3-compatible object store shared by every web and worker
# process (MinIO, Ceph, AWS S3, OSS in S3 mode). Files are always served through the
# portal's access-checked routes, never by a link into the store: no public ACL, no
# presigned URLs. Keys come from PORTAL_S3_* (not boto3's AWS_* chain), so that what is
# used is what the settings table says.
STORAGE_KIND = env_choice("PORTAL_STORAGE", "local", ("local", "s3"))
S3_ENDPOINT_URL = env_str("PORTAL_S3_ENDPOINT_URL")  # empty: AWS S3 itself
S3_BUCKET = env_str("PORTAL_S3_BUCKET")
S3_REGION = env_str("PORTAL_S3_REGION", "us-east-1")
S3_ACCESS_KEY_ID = env_str("PORTAL_S3_ACCESS_KEY_ID")
S3_SECRET_ACCESS_KEY = env_str("PORTAL_S3_SECRET_ACCESS_KEY")
S3_TIMEOUT = env_int("PORTAL_S3_TIMEOUT", 10, minimum=1)  # seconds to connect, and for a read to answer
# django-storages' S3Storage options, built whenever a bucket is named: `move_files --to local`
# reads the store with them while PORTAL_STORAGE is already local.
S3_STORAGE_OPTIONS: dict[str, object] = {}
if STORAGE_KIND == "s3" or S3_BUCKET:
    from common.storage import s3_options

    S3_STORAGE_OPTIONS = s3_options(
        endpoint_url=S3_ENDPOINT_URL,
        bucket=S3_BUCKET,
        region=S3_REGION,
        access_key=S3_ACCESS_KEY_ID,
        secret_key=S3_SECRET_ACCESS_KEY,
        timeout=S3_TIMEOUT,
    )
STORAGES: dict[str, dict[str, object]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
if STORAGE_KIND == "s3":
    from django.core.exceptions import ImproperlyConfigured

    for _name, _value in (
        ("PORTAL_S3_BUCKET", S3_BUCKET),
        ("PORTAL_S3_ACCESS_KEY_ID", S3_ACCESS_KEY_ID),
        ("PORTAL_S3_SECRET_ACCESS_KEY", S3_SECRET_ACCESS_KEY),
    ):
        if not _value:
            raise ImproperlyConfigured(f"{_name} must be set when PORTAL_STORAGE=s3.")
    if S3_ENDPOINT_URL and not S3_ENDPOINT_URL.startswith(("http://", "https://")):
        raise ImproperlyConfigured(
            f"PORTAL_S3_ENDPOINT_URL must start with http:// or https://, not {S3_ENDPOINT_URL!r}."
        )
    STORAGES["default"] = {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": S3_STORAGE_OPTIONS}
MAX_UPLOAD_MB = env_int("PORTAL_MAX_UPLOAD_MB", 200, minimum=1)
# Files in one upload request (more is a 400 before any is read) and per user per minute
# (page and API together; more is a 429 / a message, nothing stored).
DATA_UPLOAD_MAX_NUMBER_FILES = env_int("PORTAL_MAX_FILES_PER_UPLOAD", 100, minimum=1)
UPLOAD_FILES_PER_MINUTE = env_int("PORTAL_UPLOAD_FILES_PER_MINUTE", 200, minimum=1)
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knowledge.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Request bodies are JSON, typed as the schema says; only uploads are multipart (their views
    # say so). Form encodings would turn every value into text, and "" into null. DRF's JSON
    # parser with a bound on nesting: 100,000 `[` are a 400, not a RecursionError.
    "DEFAULT_PARSER_CLASSES": ["knowledge.api.parsers.BoundedJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # Every operation documents the errors it can answer; limit/offset out of range are a 400.
    "DEFAULT_SCHEMA_CLASS": "knowledge.api.schema.ApiSchema",
    "DEFAULT_PAGINATION_CLASS": "knowledge.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "knowledge.api.views.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Team knowledge portal API",
    "DESCRIPTION": (
        "Teams, collections and API tokens. Authenticate with `Authorization: Token <key>`. "
        "Request bodies are JSON (`Content-Type: application/json`), except uploads (multipart); "
        "read-only fields sent in a body are ignored."
    ),
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the installed package, not a CDN: the portal works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Two models have a "role" field: a team member's role and a chat message's author.
    "ENUM_NAME_OVERRIDES": {
        "TeamRoleEnum": "knowledge.models.teams.Role",
        "MessageRoleEnum": "assistant.models.Message.Role",
        # An evaluation's and a sync's runs share these states.
        "RunStatusEnum": "quality.models.EvaluationRun.Status",
    },
}

# Django's cache, in Redis so that every web process shares it: allauth counts failed logins
# there (ACCOUNT_RATE_LIMITS), and a lockout kept in one process's memory would let an
# attacker go on against the others. Its keys start with KEY_PREFIX (portal.limits uses
# "portal:rate"): tests delete only those, never the whole database Celery and Channels share.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "portal:cache",
        "OPTIONS": {"socket_connect_timeout": 5, "socket_timeout": 5},
    }
}

# Channels: websockets share Redis with Celery, on the same URL.
# redis-py gives up on a read after 5 s by default, the very time channels_redis blocks
# waiting for a socket's next message (BZPOPMIN, 5 s): an idle socket then died with 1011.
# A socket stays in its collection's group by joining again every GROUP_REFRESH seconds
# (knowledge.consumers), so group membership can expire soon: the channels of a daphne that
# was killed leave the groups after GROUP_EXPIRY instead of channels_redis's default day
# (during which every event was queued for them and logged "over capacity").
GROUP_REFRESH = 60
GROUP_EXPIRY = 300
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "group_expiry": GROUP_EXPIRY},
    }
}

# Celery: queues `ingest`, `quick`, `default` and the background worker's; beat's schedule
# and the routes are in portal/celery.py.
CELERY_BROKER_URL = celery_redis_url(REDIS_URL)
CELERY_RESULT_BACKEND = celery_redis_url(REDIS_URL)
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_RESULT_EXPIRES = 3600
WORKER_CONCURRENCY = env_int("PORTAL_WORKER_CONCURRENCY", 1, minimum=1)
# Files this small (bytes) are ingested on queue `quick`, which a worker of its own takes
# (manage.py up starts it): a note uploaded while a 250-page manual is being read is
# searchable in seconds instead of after it. 0: every file waits in `ingest`.
QUICK_INGEST_BYTES = env_int("PORTAL_QUICK_INGEST_BYTES", 65536, minimum=0)
# A PDF of at least twice this many pages is read by several workers at once: the worker
# that takes it reads the first pages and queues the rest in parts of this size for any
# ingest worker (ingestion/pipeline.py). 0: one worker reads every page of a document.
INGEST_PART_PAGES = env_int("PORTAL_INGEST_PART_PAGES", 48, minimum=0)

# Models, one provider per role (providers/config.py lists the variables).
MODEL_THREADS = env_int("PORTAL_MODEL_THREADS", 2, minimum=1)
MODEL_ROLES = load_roles(MODEL_THREADS)
# The local models' threads (OpenMP, in the embedder and in llama.cpp) spin this many rounds
# at a barrier before they sleep. OpenMP's default (300,000) keeps them spinning between
# steps, so an answer read while an upload was embedded took 11.1 s instead of 7.1 and the
# upload 182 ms a passage instead of 129; alone, either is as fast (bench/contention.py).
# Set before any model library loads; GOMP_SPINCOUNT or OMP_WAIT_POLICY in the environment win.
MODEL_SPIN_COUNT = env_int("PORTAL_MODEL_SPIN_COUNT", 1000, minimum=0)
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", str(MODEL_SPIN_COUNT))
MODELS_DIR = Path(env_str("PORTAL_MODELS_DIR") or VAR_DIR / "models").resolve()
# Parsers run in a child process (ingestion/parsers/guard.py): a page that takes longer than
# this many seconds to read ends it, and its document fails saying so; the worker goes on.
# Parsers that wait on a program with its own limit (ffmpeg, LibreOffice) add that limit to
# their page's. 0: parsers run in the worker, with no limit (for debugging).
PARSE_PAGE_SECONDS = env_int("PORTAL_PARSE_PAGE_SECONDS", 120, minimum=0)
# A running ingestion with no progress for this long lost its worker: it is queued again.
RUN_STALE_MINUTES = env_int("PORTAL_RUN_STALE_MINUTES", 10, minimum=1)
# Times the reconciler (ingestion/reconcile.py) sends back the same stuck document, run or
# index version before it fails it with a readable error instead.
RECONCILE_TRIES = env_int("PORTAL_RECONCILE_TRIES", 3, minimum=1)
# Sources kept in sync (sources/): folders a folder source or a Git repository on this server
# may be in (none: neither kind can be added), the key(s) credentials are encrypted with
# (comma-separated: the first encrypts, each decrypts, so a key can be rotated; empty: one
# derived from SECRET_KEY), and where Git clones are kept between runs.
SOURCE_ROOTS = env_list("PORTAL_SOURCE_ROOTS", [])
# Hosts remote sources may reach by name, at any address (empty: any host whose addresses are
# not this machine's, link-local, metadata services…; when set, only those), and whether
# private networks (10/8, 192.168/16, fc00::/7…) may be reached (common/outbound.py).
SOURCE_HOSTS = env_list("PORTAL_SOURCE_HOSTS", [])
SOURCE_PRIVATE_NETWORKS = env_bool("PORTAL_SOURCE_PRIVATE_NETWORKS", True)
# A restore with the archive's secrets writes the old keys to var/source_keys when the
# environment sets none (operations/backup.py).
SOURCE_KEYS = env_list("PORTAL_SOURCE_KEYS", []) or read_key_list(VAR_DIR / "source_keys")
SOURCE_WORKDIR = Path(env_str("PORTAL_SOURCE_WORKDIR") or VAR_DIR / "sources").resolve()
# Backups (operations/): where beat writes one every PORTAL_BACKUP_EVERY_HOURS (unset: no
# scheduled backups; `manage.py backup` works either way), how many of them are kept (the
# oldest beyond are deleted), and a folder of PostgreSQL client programs to prefer.
BACKUP_DIR = Path(env_str("PORTAL_BACKUP_DIR")).resolve() if env_str("PORTAL_BACKUP_DIR") else None
BACKUP_KEEP = env_int("PORTAL_BACKUP_KEEP", 7, minimum=1)
BACKUP_EVERY_HOURS = env_int("PORTAL_BACKUP_EVERY_HOURS", 24, minimum=1)
PG_BIN = env_str("PORTAL_PG_BIN")
# A key kept apart from the archives: backups are signed with it (an HMAC of the manifest) and
# a restore then refuses an archive it did not sign (operations/archive.py).
BACKUP_SIGNING_KEY = env_str("PORTAL_BACKUP_SIGNING_KEY")
if BACKUP_SIGNING_KEY and len(BACKUP_SIGNING_KEY) < 32:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("PORTAL_BACKUP_SIGNING_KEY must be at least 32 characters long.")
# The most a restore writes out of one archive (0: as much as the free disk space allows).
RESTORE_MAX_MB = env_int("PORTAL_RESTORE_MAX_MB", 0, minimum=0)
# The most pages one document may have (a 10,000-page PDF of blank pages is refused).
MAX_PAGES = env_int("PORTAL_MAX_PAGES", 5000, minimum=1)
# Office files (zip archives) may unpack to at most this much: zip bombs are refused.
MAX_UNZIPPED_MB = env_int("PORTAL_MAX_UNZIPPED_MB", 500, minimum=1)
# Images larger than this many megapixels are refused (decompression bombs).
MAX_IMAGE_MEGAPIXELS = env_int("PORTAL_MAX_IMAGE_MEGAPIXELS", 100, minimum=1)
# Videos and recordings longer than this are refused; frames per video are capped.
MAX_MEDIA_MINUTES = env_int("PORTAL_MAX_MEDIA_MINUTES", 240, minimum=1)
MAX_VIDEO_FRAMES = env_int("PORTAL_MAX_VIDEO_FRAMES", 240, minimum=1)
# Retrieval (assistant/retrieval): BM25 parameters, HNSW search breadth, candidates per
# channel, how many fused candidates the reranker sees (at most 20), channel weights in
# Reciprocal Rank Fusion ("lexical=1,dense=1,image=1"), and how close to the best hit a
# picture or video must be to be attached when the question asks for one.
BM25_K1 = env_float("PORTAL_BM25_K1", 1.2)
BM25_B = env_float("PORTAL_BM25_B", 0.75)
HNSW_EF_SEARCH = env_int("PORTAL_HNSW_EF_SEARCH", 100, minimum=10)
RETRIEVAL_DEPTH = env_int("PORTAL_RETRIEVAL_DEPTH", 50, minimum=1)
RERANK_CANDIDATES = min(env_int("PORTAL_RERANK_CANDIDATES", 20, minimum=1), 20)
RETRIEVAL_WEIGHTS = env_weights(
    "PORTAL_RETRIEVAL_WEIGHTS", {"lexical": 1.0, "dense": 1.0, "image": 1.0, "pictures": 1.0}
)
MEDIA_MIN_SCORE = env_float("PORTAL_MEDIA_MIN_SCORE", 0.5)
# A picture whose description holds this share of the question's weight (retrieval.pictures:
# its "match", 0-1) leads the results when the question asks to see something, at most
# PORTAL_PICTURES_PROMOTED of them; 1.01 turns the promotion off. Calibrated on the public
# evaluation (bench/README.md).
PICTURE_MATCH = env_float("PORTAL_PICTURE_MATCH", 0.5)
PICTURES_PROMOTED = env_int("PORTAL_PICTURES_PROMOTED", 2, minimum=0)
MAX_QUERY_CHARS = env_int("PORTAL_MAX_QUERY_CHARS", 2000, minimum=10)
# Answering (assistant/answering): passages given to the chat model and their total size
# (the local model has a 4k-token context), the answer's length, how long an answer may go
# without progress (no event: a stalled model, not a queue), earlier turns given to the
# router and rewriter, steps in a multi-step plan, how the strategy is chosen ("model":
# the chat model, with rules when its output is unusable; "rules" only), and questions per
# user per minute (websocket and HTTP together).
# 4 passages of 600 tokens in all: the local model reads 60-90 tokens a second on 2 cores,
# and on the public evaluation the gold page was among the first 4 passages as often as among
# 6 but once (79 and 80 of 101); their focused cut keeps 0.83 of the answer keys (6 in 900:
# 0.91) in a prompt of 639 tokens instead of 864 (medians; bench/README.md).
ANSWER_SOURCES = env_int("PORTAL_ANSWER_SOURCES", 4, minimum=1)
# About how many tokens of passages the chat model reads (answering.passages.focus keeps the
# sentences about the question): reading is most of a local answer's time.
ANSWER_CONTEXT_TOKENS = env_int("PORTAL_ANSWER_CONTEXT_TOKENS", 600, minimum=100)
# The local model as a yes/no judge of whether the passages state the answer, before it
# writes (answering.pipeline): below this P(yes) - P(no), the portal declines with the
# closest passages. -1 computes the judgement and never declines; "off" skips it. -0.3 was
# calibrated on the public evaluation with 6 passages, where it would have declined 4 more of
# the 28 unanswerable questions and none of the 101 answerable ones; with the 4 passages
# below it declined 2 of each (bench/README.md).
_judge = env_str("PORTAL_ANSWER_JUDGE", "-0.3").strip().lower()
ANSWER_JUDGE: float | None = None if _judge == "off" else env_float("PORTAL_ANSWER_JUDGE", -0.3, minimum=-1.0)
# A question that names one cell of a table in its passages (its row and its column) is
# answered with that cell, read off the row sentences, without the model (answering.cells).
ANSWER_TABLE_CELLS = env_bool("PORTAL_ANSWER_TABLE_CELLS", True)
ANSWER_MAX_TOKENS = env_int("PORTAL_ANSWER_MAX_TOKENS", 400, minimum=16)
# How an answer is made once its passages are found (assistant/answering/modes.py): from the
# evidence reader's quotes alone ("evidence"), the same once the model, reading only them, says
# they answer ("confirm"), the model choosing among them ("choose"),
# the model writing from them ("phrase"), or the model reading whole passages ("passages").
# "auto": the local model's default, chosen by the public evaluation, and "passages" with a
# remote model. In every mode the evidence is shown before any model work.
ANSWER_MODE = env_choice("PORTAL_ANSWER_MODE", "auto", ("auto", "evidence", "confirm", "choose", "phrase", "passages"))
# What the model may read when it chooses or phrases (tokens of the chosen sentences), and
# how long it may write before the evidence answer stands instead (seconds).
ANSWER_MODEL_TOKENS = env_int("PORTAL_ANSWER_MODEL_TOKENS", 250, minimum=40)
ANSWER_MODEL_SECONDS = env_float("PORTAL_ANSWER_MODEL_SECONDS", 6.0, minimum=0.5)
ANSWER_TIMEOUT = env_float("PORTAL_ANSWER_TIMEOUT", 300.0, minimum=1.0)
# Request timeouts in the web process: daphne answers 503 when a view has not answered in
# PORTAL_REQUEST_TIMEOUT seconds, and cuts a response still streaming then (so it must
# outlast an answer streamed over HTTP, and bounds downloads of originals too: the player
# and the pages fetch them in byte ranges); each SQL statement of a web request is
# cancelled after PORTAL_WEB_STATEMENT_TIMEOUT seconds (0: never). Workers have neither.
REQUEST_TIMEOUT = env_int("PORTAL_REQUEST_TIMEOUT", 600, minimum=1)
if REQUEST_TIMEOUT <= ANSWER_TIMEOUT:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        f"PORTAL_REQUEST_TIMEOUT ({REQUEST_TIMEOUT} s) must be longer than PORTAL_ANSWER_TIMEOUT"
        f" ({ANSWER_TIMEOUT:g} s): answers stream over HTTP too."
    )
WEB_STATEMENT_TIMEOUT = env_int("PORTAL_WEB_STATEMENT_TIMEOUT", 60, minimum=0)
HISTORY_TURNS = env_int("PORTAL_HISTORY_TURNS", 3, minimum=0)
PLAN_MAX_STEPS = env_int("PORTAL_PLAN_MAX_STEPS", 4, minimum=2)
ROUTER = env_choice("PORTAL_ROUTER", "model", ("model", "rules"))
ASK_RATE_PER_MINUTE = env_int("PORTAL_ASK_RATE_PER_MINUTE", 20, minimum=1)
MCP_READS_PER_MINUTE = env_int("PORTAL_MCP_READS_PER_MINUTE", 60, minimum=1)  # MCP search and get_page
# Per-user memory (assistant/memory, mem0): on or off, how many of the user's memories are
# searched for each question and given to the chat model, the least dense similarity (cosine,
# 0-1) for a memory that shares no word with the question to count as about it (0.9 suits the
# local e5 model; shared words always count), and the extraction's answer length. The memories
# are in PostgreSQL (table MEMORY_TABLE), and so is mem0's history of each memory (tables
# memory_history and memory_messages, assistant/memory/history.py); MEM0_DIR keeps only
# mem0's own config.json, and a history.db of before issue 24 until it is imported.
MEMORY_ENABLED = env_bool("PORTAL_MEMORY", True)
MEMORY_SEARCH_LIMIT = env_int("PORTAL_MEMORY_SEARCH_LIMIT", 5, minimum=1)
MEMORY_MIN_SCORE = env_float("PORTAL_MEMORY_MIN_SCORE", 0.9, minimum=0.0)
MEMORY_MAX_TOKENS = env_int("PORTAL_MEMORY_MAX_TOKENS", 300, minimum=32)
# The longest an extraction waits for answers in progress and ingestion to end (seconds);
# after that it runs anyway, so that memories are not put off for ever on a busy portal.
MEMORY_IDLE_WAIT = env_int("PORTAL_MEMORY_IDLE_WAIT", 600, minimum=0)
MEMORY_TABLE = "memory_mem0"
MEM0_DIR = Path(env_str("MEM0_DIR") or VAR_DIR / "mem0").resolve()
# Retired index versions kept for rollback, per collection.
KEEP_VERSIONS = env_int("PORTAL_KEEP_VERSIONS", 1, minimum=0)
# The evaluation gate (quality/): a newly built version of a collection with golden questions
# flips only if none of hit@1, hit@5 and MRR fell by more than this many points (0-100) from
# the active version's; a collection's own setting ("gate_points") overrides it. Between two
# questions an evaluation waits for answers in progress, at most this many seconds.
GATE_POINTS = env_float("PORTAL_GATE_POINTS", 2.0, minimum=0.0)
EVALUATION_IDLE_WAIT = env_int("PORTAL_EVALUATION_IDLE_WAIT", 60, minimum=0)

# Where `manage.py up` serves HTTP and websockets.
HOST = env_str("PORTAL_HOST", "127.0.0.1")
PORT = env_int("PORTAL_PORT", 8000, minimum=1)

# Browser-facing security, the same with and without DEBUG. PORTAL_HTTPS=true is the one
# switch for a site served over HTTPS: HTTP redirected, cookies sent over HTTPS only, and
# HSTS for SECURE_HSTS_SECONDS (a year; subdomains included unless turned off), which
# `manage.py check --deploy` then passes (tests/portal/test_security.py).
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the pages' scripts send the CSRF token from the cookie
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
HTTPS = env_bool("PORTAL_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# /healthz answers the proxy's and the orchestrator's plain-HTTP probes.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
if env_bool("PORTAL_BEHIND_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# /metrics (operations/metrics.py, docs/metrics.md): served to a request with
# `Authorization: Bearer <PORTAL_METRICS_TOKEN>` (unset: no token opens it) or straight from
# an address in PORTAL_METRICS_ALLOWED_ADDRESSES (addresses or CIDR networks; `none`: the token
# only); a request relayed by a proxy needs the token. Plain HTTP like /healthz: Prometheus
# scrapes each web process at its own address. Every process of a machine keeps its counts in
# files in PORTAL_METRICS_DIR (prometheus_client's multiprocess mode, which reads
# PROMETHEUS_MULTIPROC_DIR); `manage.py up` empties it before it starts them.
METRICS_TOKEN = env_str("PORTAL_METRICS_TOKEN")
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("PORTAL_METRICS_TOKEN must be at least 16 characters long.")
_metrics_addresses = env_list("PORTAL_METRICS_ALLOWED_ADDRESSES", ["127.0.0.1/32", "::1/128"])
try:
    METRICS_ALLOWED_NETWORKS = [ipaddress.ip_network(item) for item in _metrics_addresses if item.lower() != "none"]
except ValueError as exc:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"PORTAL_METRICS_ALLOWED_ADDRESSES: {exc}.") from None
METRICS_DIR = Path(env_str("PORTAL_METRICS_DIR") or VAR_DIR / "run" / "metrics").resolve()
METRICS_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
SECURE_REDIRECT_EXEMPT.append(r"^metrics$")
# W021: preloading is a decision for the site's owner (SECURE_HSTS_PRELOAD), not a default.
SILENCED_SYSTEM_CHECKS = ["security.W021"]

LOG_LEVEL = env_choice("LOG_LEVEL", "info", ("debug", "info", "warning", "error")).upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"secrets": {"()": "portal.redact.RedactSecrets"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["secrets"]}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # mem0 says at INFO what it does on every call ("Inserting 1 vectors …").
    "loggers": {"mem0": {"level": "WARNING" if LOG_LEVEL != "DEBUG" else "DEBUG"}},
}

# Nothing phones home, and no library fetches weights from a hub at run time. mem0 reads
# these when it is imported, which is always after the settings.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["MEM0_DIR"] = str(MEM0_DIR)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
