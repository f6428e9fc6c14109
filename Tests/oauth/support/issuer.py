"""The addresses of an OpenID Connect issuer served on loopback at http://HOST:PORT/o."""
from __future__ import annotations


class LoopbackIssuer:
    """Mixed into servers that set `host_ip` and `port`."""

    host_ip: str
    port: int

    @property
    def host(self) -> str:
        """"127.0.0.1:PORT", the form Browser's allowlist takes."""
        return f"{self.host_ip}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}"

    @property
    def issuer(self) -> str:
        return f"{self.base_url}/o"

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"
