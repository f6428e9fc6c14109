"""Django settings for the loopback test authorization server (django-oauth-toolkit).

Everything that varies between runs comes from the environment (the pytest fixture in
Tests/oauth/support/authserver.py sets these):

  AUTHSERVER_DATA_DIR               directory for the SQLite database (default: a new temp dir)
  AUTHSERVER_ISSUER                 e.g. http://127.0.0.1:PORT/o (default: derived per request)
  AUTHSERVER_RSA_KEY_FILE           PEM file for the ID-token signing key; generated (and written
                                    there) when missing. Unset: a fresh key in memory per process.
  AUTHSERVER_ACCESS_TOKEN_LIFETIME  access-token lifetime in seconds (default 3600); also
                                    changeable at run time through POST /test/config
  AUTHSERVER_REDIRECT_SCHEMES       comma-separated redirect URI schemes (default http,https)
  AUTHSERVER_APPROVAL_PROMPT        DOT REQUEST_APPROVAL_PROMPT: force (default) or auto
  AUTHSERVER_DEBUG                  1 for Django DEBUG pages

This is a TEST server: the /test/* endpoints are unauthenticated and must never be exposed.
"""

import os
import secrets
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

BASE_DIR = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("AUTHSERVER_DATA_DIR") or tempfile.mkdtemp(prefix="authserver-"))
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _rsa_private_key_pem() -> str:
    path = os.environ.get("AUTHSERVER_RSA_KEY_FILE")
    if path and os.path.exists(path):
        return Path(path).read_text()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(pem)
    return pem


SECRET_KEY = os.environ.get("AUTHSERVER_SECRET_KEY") or secrets.token_urlsafe(50)
DEBUG = os.environ.get("AUTHSERVER_DEBUG") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
    "testhooks",
]

MIDDLEWARE = [
    # First, so that it counts every token-endpoint request and can inject faults.
    "testhooks.middleware.TestHooksMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]

ROOT_URLCONF = "urls"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ],
        },
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(DATA_DIR / "authserver.sqlite3"),
        "OPTIONS": {
            # Concurrent token requests: wait for the lock instead of failing, and take the
            # write lock at BEGIN so two refreshes never deadlock on a lock upgrade.
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Fast hashing: these are throw-away test users (client secrets are stored unhashed).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AUTH_PASSWORD_VALIDATORS = []

LOGIN_URL = "/accounts/login/"
# Distinct cookie names: the broker under test also lives on 127.0.0.1 and cookies ignore ports.
SESSION_COOKIE_NAME = "authserver_sessionid"
CSRF_COOKIE_NAME = "authserver_csrftoken"

USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
USE_I18N = False

ISSUER = os.environ.get("AUTHSERVER_ISSUER", "").rstrip("/")
ACCESS_TOKEN_LIFETIME = int(os.environ.get("AUTHSERVER_ACCESS_TOKEN_LIFETIME", "3600"))


def _access_token_lifetime(request):
    # Read on every token response, so POST /test/config can change it at run time.
    from testhooks import runtime

    return runtime.access_token_lifetime()


OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": _rsa_private_key_pem(),
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_USERINFO_ENDPOINT": f"{ISSUER}/userinfo/" if ISSUER else "",
    "OAUTH2_VALIDATOR_CLASS": "testhooks.validators.TestOAuth2Validator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "profile": "Your name and username",
        "email": "Your email address",
        "read": "Read access",
        "write": "Write access",
    },
    "DEFAULT_SCOPES": ["read"],
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # S256 only
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "ACCESS_TOKEN_EXPIRE_SECONDS": ACCESS_TOKEN_LIFETIME,
    "ID_TOKEN_EXPIRE_SECONDS": 3600,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "EXTRA_SERVER_KWARGS": {"token_expires_in": _access_token_lifetime},
    "ALLOWED_REDIRECT_URI_SCHEMES": [
        s.strip() for s in os.environ.get("AUTHSERVER_REDIRECT_SCHEMES", "http,https").split(",") if s.strip()
    ],
    "REQUEST_APPROVAL_PROMPT": os.environ.get("AUTHSERVER_APPROVAL_PROMPT", "force"),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django.request": {"handlers": ["console"], "level": "WARNING"},
        "oauth2_provider": {"handlers": ["console"], "level": "WARNING"},
        "testhooks": {"handlers": ["console"], "level": "INFO"},
    },
}
