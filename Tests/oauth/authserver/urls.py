from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from testhooks import views as test_views

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(template_name="registration/login.html"), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # authorize/, token/, revoke_token/, introspect/, userinfo/, .well-known/openid-configuration,
    # .well-known/jwks.json ... -> issuer is http://HOST:PORT/o
    # DOT's discovery document + revocation/introspection endpoints (shadows DOT's own route).
    re_path(r"^o/\.well-known/openid-configuration/?$", test_views.DiscoveryView.as_view()),
    # DOT's authorization view, with prompt=none completed without UI (testhooks/views.py).
    path("o/authorize/", test_views.TestAuthorizationView.as_view()),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    # Test-only API (see testhooks/views.py).
    path("test/stats", test_views.stats),
    path("test/requests", test_views.requests_view),
    path("test/traces", test_views.traces_view),
    path("test/reset", test_views.reset),
    path("test/config", test_views.config),
    path("test/config/reset", test_views.config_reset),
    path("test/users", test_views.users),
    path("test/clients", test_views.clients),
    path("test/revoke_user", test_views.revoke_user),
    path("test/token_status", test_views.token_status),
    path("test/expire_token", test_views.expire_token),
    path("test/user_tokens", test_views.user_tokens),
]
