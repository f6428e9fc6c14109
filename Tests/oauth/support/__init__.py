"""Support code for OAuth integration tests: the loopback authorization server and a browser."""

from .authserver import AuthServer, AuthServerError, OAuthUser
from .issuer import free_port
from .browser import Browser, BrowserError, host_port, parse_forms, query_params
from .pkce import make_pkce

__all__ = [
    "AuthServer",
    "AuthServerError",
    "OAuthUser",
    "Browser",
    "BrowserError",
    "free_port",
    "host_port",
    "make_pkce",
    "parse_forms",
    "query_params",
]
