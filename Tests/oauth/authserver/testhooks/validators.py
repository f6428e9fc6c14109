from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model
from oauth2_provider.oauth2_validators import OAuth2Validator

from . import runtime

AccessToken = get_access_token_model()
Application = get_application_model()


def _profile(user):
    return getattr(user, "oidc_profile", None)


def _name(request):
    p = _profile(request.user)
    return (p.name if p and p.name else request.user.get_full_name()) or request.user.username


def _email_verified(request):
    p = _profile(request.user)
    return bool(p.email_verified) if p else False


def _picture(request):
    p = _profile(request.user)
    return p.picture if p and p.picture else None


class TestOAuth2Validator(OAuth2Validator):
    """Adds the standard profile/email claims to the ID token and userinfo.

    Claims are filtered by scope as in OIDC Core 5.4 (DOT's oidc_claim_scope): `sub` always,
    `name`/`preferred_username`/`picture` with `profile`, `email`/`email_verified` with `email`.
    `sub` is the Django user's primary key as a string.
    """

    # Request-agnostic form (no `request` parameter): the claim names are then also listed in
    # the discovery document's claims_supported.
    def get_additional_claims(self):
        return {
            "name": _name,
            "preferred_username": lambda r: r.user.username,
            "email": lambda r: r.user.email,
            "email_verified": _email_verified,
            "picture": _picture,
        }

    def get_oidc_claims(self, token, token_handler, request):
        claims = super().get_oidc_claims(token, token_handler, request)
        return {k: v for k, v in claims.items() if v is not None}

    # ---- prompt=none (OIDC Core 3.1.2.1); DOT leaves these two oauthlib hooks unimplemented.
    def validate_silent_login(self, request):
        django_request = getattr(runtime.current, "request", None)
        user = getattr(django_request, "user", None)
        return bool(user is not None and user.is_authenticated)

    def validate_silent_authorization(self, request):
        """Silent authorization succeeds when the app may skip consent, or when the user already
        holds an unexpired access token for this app covering the requested scopes (the same rule
        as DOT's approval_prompt=auto, which TestAuthorizationView then applies)."""
        django_request = getattr(runtime.current, "request", None)
        user = getattr(django_request, "user", None)
        if user is None or not user.is_authenticated:
            return False
        app = Application.objects.filter(client_id=request.client_id).first()
        if app is None:
            return False
        if app.skip_authorization:
            return True
        tokens = AccessToken.objects.filter(user=user, application=app, expires__gt=timezone.now())
        return any(t.allow_scopes(request.scopes) for t in tokens)
