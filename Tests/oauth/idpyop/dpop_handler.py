"""DPoP (RFC 9449) in the tests' OpenID Provider's HTTP handler (server.py's Handler): the proof
checks at /par, /token, /revoke and /userinfo before idpyoidc parses the request, and the
DPoP-protected API under /api/ (the checks themselves are dpop_checks.py's).
"""

from __future__ import annotations

import dpop_checks  # beside server.py, which is run as a script
from dpop_checks import DPoPError


# idpyoidc's endpoint name -> the name in seen["dpop"], for the endpoints that take a DPoP proof
DPOP_AS_ENDPOINTS = {"pushed_authorization": "par", "token": "token", "token_revocation": "revoke"}


class DPoPHandling:
    """Handler's DPoP part: it uses the handler's `provider`, `headers`, `command`,
    `path`, `extra_headers`, `rfile` and `_send`."""

    def _dpop_refused(self, endpoint, args, http_info: dict) -> bool:
        """Checks the DPoP proof of a request to /par, /token, /revoke or /userinfo before
        idpyoidc parses it; answers a refused one (and returns True). A good proof at /token
        leaves its key's thumbprint in http_info["dpop_jkt"]."""
        provider, dpop = self.provider, self.provider.dpop
        if endpoint.name == "userinfo":
            return self._dpop_userinfo_refused()
        name = DPOP_AS_ENDPOINTS.get(endpoint.name)
        if name is None:
            return False
        if dpop.require_nonce:
            self.extra_headers.append(("DPoP-Nonce", dpop.nonce))
        form = args if isinstance(args, dict) else {}
        grant_type = form.get("grant_type") if name == "token" else None
        bound = None
        if grant_type == "refresh_token" and form.get("refresh_token"):
            bound = provider.refresh_token_binding(form["refresh_token"])
        proofs = self.headers.get_all("DPoP") or []
        try:
            if not proofs:
                if name == "token" and provider.cfg.get("dpop_required"):
                    raise DPoPError("invalid_dpop_proof", "a DPoP proof is required at this token endpoint")
                if bound:
                    raise DPoPError("invalid_dpop_proof", "the grant is DPoP-bound: a refresh needs a proof of its key")
                return False
            proof = dpop.check(proofs, self.command, http_info["url"], bound_jkt=bound)
        except DPoPError as err:
            provider.record_dpop(name, proofs, accepted=False, error=err.error, grant_type=grant_type)
            self._send(400, {"error": err.error, "error_description": err.description})
            return True
        provider.record_dpop(name, proofs, accepted=True, grant_type=grant_type)
        if name == "token":
            http_info["dpop_jkt"] = proof.jkt
        return False

    def _dpop_userinfo_refused(self) -> bool:
        # `Authorization: DPoP`: checked as at the API, then idpyoidc answers (its "DPoP" scheme
        # takes the token like a bearer one). A DPoP-bound token sent as Bearer is refused.
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() == "dpop":
            return self._dpop_resource("userinfo", token.strip()) is None
        if scheme.lower() == "bearer":
            try:
                claims = dpop_checks.access_token_claims(
                    self.provider.context.keyjar, self.provider.issuer, token.strip())
            except DPoPError:
                return False  # not one of its JWTs: idpyoidc decides, as before
            jkt = (claims.get("cnf") or {}).get("jkt")
            if jkt:
                if self.provider.dpop.require_nonce:
                    self.extra_headers.append(("DPoP-Nonce", self.provider.dpop.nonce))
                error = DPoPError("invalid_token", "a DPoP-bound access token must be sent with the DPoP scheme")
                self.provider.record_dpop("userinfo", [], accepted=False, error=error.error, jkt=jkt)
                self._send_dpop_challenge(error)
                return True
        return False

    def _dpop_resource(self, name: str, token: str):
        """(token claims, Proof) of a request with `Authorization: DPoP <token>` at a protected
        resource, or None once its 401 is sent."""
        provider, dpop = self.provider, self.provider.dpop
        if dpop.require_nonce:
            self.extra_headers.append(("DPoP-Nonce", dpop.nonce))
        proofs = self.headers.get_all("DPoP") or []
        try:
            if not token:
                raise DPoPError("invalid_token", "a DPoP access token is required (Authorization: DPoP <token>)")
            claims = dpop_checks.access_token_claims(provider.context.keyjar, provider.issuer, token)
            jkt = (claims.get("cnf") or {}).get("jkt")
            if not jkt:
                raise DPoPError("invalid_token", "the access token is not DPoP-bound (no cnf.jkt)")
            url = f"http://{self.headers.get('Host', '')}{self.path}"
            proof = dpop.check(proofs, self.command, url, access_token=token, bound_jkt=jkt)
        except DPoPError as err:
            provider.record_dpop(name, proofs, accepted=False, error=err.error)
            self._send_dpop_challenge(err)
            return None
        provider.record_dpop(name, proofs, accepted=True)
        return claims, proof

    def _send_dpop_challenge(self, err: DPoPError) -> None:
        # RFC 9449 §7.1 / RFC 6750 §3: a 401 naming the DPoP scheme, the error and the algorithms.
        description = err.description.replace("\\", "").replace('"', "'")
        challenge = f'DPoP error="{err.error}", error_description="{description}", algs="{" ".join(dpop_checks.ALGS)}"'
        self._send(401, {"error": err.error, "error_description": err.description},
                   headers=[("WWW-Authenticate", challenge)])

    def _dpop_api(self, query: str):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if self.command == "POST" else b""
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        checked = self._dpop_resource("api", token.strip() if scheme.lower() == "dpop" else "")
        if checked is None:
            return None
        claims, proof = checked
        answer = {"sub": claims.get("sub"), "jkt": proof.jkt, "method": self.command,
                  "path": self.path.partition("?")[0], "query": query}
        if self.command == "POST":
            answer["body_length"] = len(body)
        return self._send(200, answer)
