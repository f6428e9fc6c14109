"""Test-only JSON API under /test/ (no authentication: loopback test server only).

GET  /test/stats            token-endpoint requests by grant_type, e.g. {"refresh_token": 3}
GET  /test/requests         requests by endpoint, e.g. {"token": 4, "userinfo": 1, "authorize": 2}
GET  /test/traces           {"traces": [...]}: the trace headers of requests that carried any, in order
POST /test/reset            zero both counters and forget the traces
GET  /test/config           current run-time config
POST /test/config           JSON {"access_token_lifetime": 5, "faults": {"token": {...} | null}}
POST /test/config/reset     back to the start-up config, no faults
POST /test/users            JSON {"username", "password", "email"?, "name"?, "email_verified"?}
POST /test/clients          JSON {"redirect_uris": [...], "client_type"?, "grant_type"?, ...}
POST /test/revoke_user      ?username=alice (query or form): revoke all of the user's grants/tokens
POST /test/token_status     form token=...: {"active": bool, "token_type": ...}
POST /test/expire_token     form token=...: make an access token expire now
GET  /test/user_tokens      ?username=alice[&client_id=...]: every access and refresh token of the
                            user (oldest first), {"access_tokens": [{"token", "expires", "active"}],
                            "refresh_tokens": [{"token", "revoked", "active"}]}
"""

import hashlib
import json
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import AuthorizationView, ConnectDiscoveryInfoView

from . import runtime
from .models import Profile

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
Grant = get_grant_model()
IDToken = get_id_token_model()
Application = get_application_model()


def _json(data, status=200):
    resp = JsonResponse(data, status=status)
    resp["Cache-Control"] = "no-store"
    return resp


def _error(description, status=400):
    return _json({"error": "invalid_request", "error_description": description}, status)


def _body_json(request):
    if not request.body:
        return {}
    return json.loads(request.body)


def _param(request, name):
    return request.POST.get(name) or request.GET.get(name)


def _checksum(token):
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@csrf_exempt
def stats(request):
    return _json(runtime.grant_counts())


@csrf_exempt
def requests_view(request):
    return _json(runtime.endpoint_counts())


@csrf_exempt
def traces_view(request):
    return _json({"traces": runtime.traces()})


@csrf_exempt
def reset(request):
    if request.method != "POST":
        return _error("POST only", 405)
    runtime.reset_counts()
    return _json({"ok": True})


@csrf_exempt
def config(request):
    if request.method == "POST":
        try:
            runtime.update_config(_body_json(request))
        except (ValueError, TypeError, json.JSONDecodeError) as e:
            return _error(str(e))
    return _json(runtime.get_config())


@csrf_exempt
def config_reset(request):
    if request.method != "POST":
        return _error("POST only", 405)
    runtime.reset_config()
    return _json(runtime.get_config())


@csrf_exempt
def users(request):
    if request.method != "POST":
        return _error("POST only", 405)
    data = _body_json(request)
    username, password = data.get("username"), data.get("password")
    if not username or not password:
        return _error("username and password are required")
    User = get_user_model()
    with transaction.atomic():
        user, _ = User.objects.get_or_create(username=username)
        user.email = data.get("email") or f"{username}@example.test"
        name = data.get("name") or username.capitalize()
        first, _, last = name.partition(" ")
        user.first_name, user.last_name = first, last
        user.set_password(password)
        user.is_active = data.get("is_active", True)
        user.save()
        Profile.objects.update_or_create(
            user=user,
            defaults={
                "name": name,
                "email_verified": bool(data.get("email_verified", True)),
                "picture": data.get("picture") or "",
            },
        )
    return _json({"username": user.username, "sub": str(user.pk), "email": user.email, "name": name})


_GRANT_TYPES = {
    "authorization_code": Application.GRANT_AUTHORIZATION_CODE,
    "authorization-code": Application.GRANT_AUTHORIZATION_CODE,
    "client_credentials": Application.GRANT_CLIENT_CREDENTIALS,
    "client-credentials": Application.GRANT_CLIENT_CREDENTIALS,
    "password": Application.GRANT_PASSWORD,
    "implicit": Application.GRANT_IMPLICIT,
    "openid-hybrid": Application.GRANT_OPENID_HYBRID,
}


@csrf_exempt
def clients(request):
    if request.method != "POST":
        return _error("POST only", 405)
    data = _body_json(request)
    redirect_uris = data.get("redirect_uris") or []
    if isinstance(redirect_uris, str):
        redirect_uris = redirect_uris.split()
    grant_type = _GRANT_TYPES.get(data.get("grant_type", "authorization-code"))
    if grant_type is None:
        return _error(f"unknown grant_type {data.get('grant_type')!r}")
    client_type = data.get("client_type", "confidential")
    if client_type not in (Application.CLIENT_CONFIDENTIAL, Application.CLIENT_PUBLIC):
        return _error(f"unknown client_type {client_type!r}")
    algorithm = data.get("algorithm", "RS256") or Application.NO_ALGORITHM
    if algorithm not in (Application.NO_ALGORITHM, Application.RS256_ALGORITHM, Application.HS256_ALGORITHM):
        return _error(f"unknown algorithm {algorithm!r}")
    owner = None
    if data.get("owner"):
        owner = get_user_model().objects.filter(username=data["owner"]).first()
    secret = data.get("client_secret") or secrets.token_urlsafe(32)
    app = Application(
        name=data.get("name") or "test client",
        client_type=client_type,
        authorization_grant_type=grant_type,
        redirect_uris=" ".join(redirect_uris),
        algorithm=algorithm,
        skip_authorization=bool(data.get("skip_authorization", False)),
        client_secret=secret if client_type == Application.CLIENT_CONFIDENTIAL else "",
        # Stored in clear: Django's password hashers would cost ~0.3 s per client authentication.
        hash_client_secret=False,
        user=owner,
    )
    if data.get("client_id"):
        app.client_id = data["client_id"]
    app.save()
    return _json(
        {
            "client_id": app.client_id,
            "client_secret": secret if client_type == Application.CLIENT_CONFIDENTIAL else None,
        }
    )


@csrf_exempt
def revoke_user(request):
    """Simulate the user revoking the app's access at the provider: every token and pending
    authorization code of the user (optionally only for one client_id) dies at once."""
    username = _param(request, "username")
    if not username:
        return _error("username is required")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        return _error(f"no user {username!r}", 404)
    client_id = _param(request, "client_id")
    with runtime.token_lock, transaction.atomic():
        refresh = RefreshToken.objects.filter(user=user, revoked__isnull=True)
        access = AccessToken.objects.filter(user=user)
        grants = Grant.objects.filter(user=user)
        id_tokens = IDToken.objects.filter(user=user)
        if client_id:
            refresh = refresh.filter(application__client_id=client_id)
            access = access.filter(application__client_id=client_id)
            grants = grants.filter(application__client_id=client_id)
            id_tokens = id_tokens.filter(application__client_id=client_id)
        n_refresh = refresh.update(revoked=timezone.now())
        n_access = access.count()
        access.delete()
        n_grants = grants.count()
        grants.delete()
        id_tokens.delete()
    return _json({"refresh_tokens": n_refresh, "access_tokens": n_access, "grants": n_grants})


def _refresh_token_active(rt, now):
    """Usable: not revoked, still linked to its access token, not past REFRESH_TOKEN_EXPIRE_SECONDS."""
    active = rt.revoked is None and rt.access_token is not None
    expire = oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS
    if active and expire and rt.access_token.expires + timedelta(seconds=int(expire)) < now:
        active = False
    return active


def _token_status(token):
    now = timezone.now()
    at = AccessToken.objects.select_related("user", "application").filter(token_checksum=_checksum(token)).first()
    if at is not None:
        return {
            "active": not at.is_expired(),
            "token_type": "access_token",
            "expires_at": at.expires.isoformat(),
            "scope": at.scope,
            "username": at.user.username if at.user else None,
            "client_id": at.application.client_id if at.application else None,
        }
    rt = (
        RefreshToken.objects.select_related("user", "application", "access_token")
        .filter(token_checksum=_checksum(token))
        .order_by("-id")
        .first()
    )
    if rt is not None:
        return {
            "active": _refresh_token_active(rt, now),
            "token_type": "refresh_token",
            "revoked": rt.revoked.isoformat() if rt.revoked else None,
            "username": rt.user.username,
            "client_id": rt.application.client_id,
        }
    return {"active": False, "token_type": None}


@csrf_exempt
def token_status(request):
    token = _param(request, "token")
    if not token:
        return _error("token is required")
    return _json(_token_status(token))


@csrf_exempt
def expire_token(request):
    """Make an access token expire now (so a client must refresh) without waiting."""
    if request.method != "POST":
        return _error("POST only", 405)
    token = _param(request, "token")
    if not token:
        return _error("token is required")
    with runtime.token_lock:
        n = AccessToken.objects.filter(token_checksum=_checksum(token)).update(
            expires=timezone.now() - timedelta(seconds=1)
        )
    if not n:
        return _error("unknown access token", 404)
    return _json({"ok": True})


@csrf_exempt
def user_tokens(request):
    """Every access token and refresh token of a user (optionally of one client), oldest first,
    in clear, with whether each is still usable. Read-only: looking touches no token. Lets a test
    see what a client (the broker) holds without the client revealing it, e.g. to prove refresh
    token rotation."""
    username = _param(request, "username")
    if not username:
        return _error("username is required")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        return _error(f"no user {username!r}", 404)
    client_id = _param(request, "client_id")
    now = timezone.now()
    with runtime.token_lock:
        access = AccessToken.objects.select_related("application").filter(user=user)
        refresh = RefreshToken.objects.select_related("application", "access_token").filter(user=user)
        if client_id:
            access = access.filter(application__client_id=client_id)
            refresh = refresh.filter(application__client_id=client_id)
        access_tokens = [
            {
                "token": at.token,
                "expires": at.expires.isoformat(),
                "active": not at.is_expired(),
                "scope": at.scope,
                "client_id": at.application.client_id if at.application else None,
                "created": at.created.isoformat(),
            }
            for at in access.order_by("id")
        ]
        refresh_tokens = [
            {
                "token": rt.token,
                "revoked": rt.revoked.isoformat() if rt.revoked else None,
                "active": _refresh_token_active(rt, now),
                "client_id": rt.application.client_id,
                "created": rt.created.isoformat(),
            }
            for rt in refresh.order_by("id")
        ]
    return _json({"access_tokens": access_tokens, "refresh_tokens": refresh_tokens})


class DiscoveryView(ConnectDiscoveryInfoView):
    """DOT's OIDC discovery document plus the RFC 8414 fields DOT leaves out of it but real
    providers (Google, ...) publish there: revocation and introspection endpoints."""

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        data = json.loads(response.content)
        data["revocation_endpoint"] = self._get_endpoint_url(request, "revoke-token", required=True)
        data["revocation_endpoint_auth_methods_supported"] = ["client_secret_basic", "client_secret_post"]
        data["introspection_endpoint"] = self._get_endpoint_url(request, "introspect", required=True)
        data["grant_types_supported"] = ["authorization_code", "refresh_token", "client_credentials"]
        new = JsonResponse(data)
        for header, value in response.items():
            if header.lower() not in ("content-type", "content-length"):
                new[header] = value
        return new


class TestAuthorizationView(AuthorizationView):
    """DOT's authorization endpoint, except that prompt=none never shows the consent page: once
    the silent-login/-authorization checks (testhooks.validators) have passed, the code is issued
    as with approval_prompt=auto; otherwise DOT redirects with login_required/consent_required."""

    def get(self, request, *args, **kwargs):
        if "none" in request.GET.get("prompt", "").split():
            request.GET = request.GET.copy()
            request.GET["approval_prompt"] = "auto"
        return super().get(request, *args, **kwargs)
