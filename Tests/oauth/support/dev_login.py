"""A sign-in through the development provider (`--dev`), as the README's walk-through does it."""
import base64
import hashlib
import secrets
from typing import Optional
from urllib.parse import urlencode

import requests

from support.browser import query_params

REDIRECT_URI = "http://127.0.0.1/callback"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def dev_login(broker, user: str = "alice") -> Optional[requests.Response]:
    """Signs `user` in and redeems the handoff code: the `POST /token` answer, or None when the
    broker sent the app `temporarily_unavailable` because it could not save the handoff code."""
    verifier, challenge = pkce()
    query = urlencode({"provider": "dev", "app": "demo", "redirect_uri": REDIRECT_URI,
                       "code_challenge": challenge, "code_challenge_method": "S256"})
    sign_in = requests.get(broker.url("/authorize?" + query), allow_redirects=False, timeout=10).headers["Location"]
    callback = requests.post(sign_in, data={"user": user, "decision": "allow"}, allow_redirects=False, timeout=10)
    back = query_params(requests.get(callback.headers["Location"], allow_redirects=False, timeout=10).headers["Location"])
    if back.get("error") == "temporarily_unavailable":
        return None
    return requests.post(broker.url("/token"), data={
        "grant_type": "authorization_code", "code": back["code"], "code_verifier": verifier,
        "redirect_uri": REDIRECT_URI, "app": "demo"}, timeout=10)
