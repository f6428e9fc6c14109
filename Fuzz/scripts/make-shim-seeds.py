#!/usr/bin/env python3
"""Writes the seed corpus of the `shim` target into corpus/shim/ (control byte + raw request).

The control byte's bits are documented in shim/shim_fuzz.c. The requests are the broker's real
endpoints (openapi.yaml) in the shapes its clients send, plus the framing cases that matter to
libmicrohttpd: chunked bodies, pipelining, limits, absolute targets, bad framing.
"""
import pathlib

OUT = pathlib.Path(__file__).resolve().parent.parent / "corpus" / "shim"

FORM = b"grant_type=authorization_code&code=SplxlOBeZQQYbYS6WxSbIA&code_verifier=dBjftJeZ4CVP-mJ92K9f-a7B8z1l3kQyY1gDg6r5cVw&client_id=demo"
SEEDS = {
    "get-health": (0, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"),
    "get-authorize": (0, b"GET /authorize?app=demo&provider=dev&redirect_uri=http%3A%2F%2F127.0.0.1%3A9000%2Fcb&state=xyz&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256 HTTP/1.1\r\nHost: broker\r\nAccept: text/html\r\n\r\n"),
    "get-callback-deferred": (2, b"GET /callback?code=abc&state=s HTTP/1.1\r\nHost: broker\r\nCookie: a=b\r\n\r\n"),
    "post-token-form": (0, b"POST /token HTTP/1.1\r\nHost: broker\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % len(FORM) + FORM),
    "post-token-deferred-thread": (2, b"POST /token HTTP/1.1\r\nHost: broker\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % len(FORM) + FORM),
    "post-token-deferred-inline": (1, b"POST /token HTTP/1.1\r\nHost: broker\r\nContent-Length: %d\r\n\r\n" % len(FORM) + FORM),
    "get-token-bearer": (0, b"GET /token HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer tb_s_abcdefghijklmnopqrstuvwxyz0123456789\r\nOrigin: https://app.example.test\r\n\r\n"),
    "delete-session-close": (8, b"DELETE /session HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer x\r\nConnection: close\r\n\r\n"),
    "forwarded-twice": (0, b"GET /authorize?provider=x HTTP/1.1\r\nHost: broker\r\nX-Forwarded-For: 198.51.100.9, 10.1.2.3\r\nx-forwarded-for: 203.0.113.7\r\n\r\n"),
    "options-cors": (0, b"OPTIONS /token HTTP/1.1\r\nHost: broker\r\nOrigin: https://app.example.test\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization\r\n\r\n"),
    "post-json-chunked": (0, b"POST /session/refresh HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{\"a\":1}\r\n3;ext=1\r\n   \r\n0\r\nTrailer: x\r\n\r\n"),
    "body-over-limit": (0, b"POST /token HTTP/1.1\r\nHost: broker\r\nContent-Length: 3000\r\n\r\n" + b"a" * 3000),
    "declared-over-limit": (0, b"POST /token HTTP/1.1\r\nHost: broker\r\nContent-Length: 99999999999999999999\r\n\r\nabc"),
    "chunked-over-limit": (2, b"POST /token HTTP/1.1\r\nHost: broker\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + b"b" * 2048 + b"\r\n10\r\n" + b"c" * 16 + b"\r\n0\r\n\r\n"),
    "pipelined": (0, b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nPOST /token HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"),
    "pipelined-deferred": (2, b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n"),
    "no-answer": (3, b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n"),
    "refused-connection": (4, b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"),
    "refused-with-body": (6, b"POST /token HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody"),
    "echo-header": (16, b"GET / HTTP/1.1\r\nHost: a\r\nX-Echo: value with spaces\r\n\r\n"),
    "http10": (0, b"GET /healthz HTTP/1.0\r\n\r\n"),
    "absolute-target": (0, b"GET http://broker:8080/token?x=1#frag HTTP/1.1\r\nHost: broker\r\n\r\n"),
    "folded-header": (0, b"GET / HTTP/1.1\r\nHost: a\r\nX-Echo: one\r\n two\r\n\r\n"),
    "expect-continue": (0, b"POST /token HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc"),
    "duplicate-length": (0, b"POST /token HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"),
    "bare-lf": (0, b"GET /healthz HTTP/1.1\nHost: a\n\n"),
    "incomplete-body": (2, b"POST /token HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nshort"),
    "long-header": (0, b"GET / HTTP/1.1\r\nHost: a\r\nCookie: " + b"c" * 17000 + b"\r\n\r\n"),
    "percent-target": (0, b"GET /%2e%2e/%00%ff?q=%zz&&=& HTTP/1.1\r\nHost: a\r\n\r\n"),
    "unknown-method": (1, b"BREW /pot HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"),
    # Refused by the shim's framing checks (framing.c), each with a smuggled request behind it.
    "length-and-chunked": (0, b"POST /token HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n"),
    "gzip-coding": (0, b"POST /token HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\nabc"),
    "gzip-chunked-coding": (2, b"POST /token HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n"),
    "space-before-colon": (0, b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 4\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n"),
    "nul-in-target": (0, b"GET /a\x00/b HTTP/1.1\r\nHost: a\r\n\r\n"),
    "nul-in-value": (0, b"GET / HTTP/1.1\r\nHost: a\r\nX-Echo: b\x00c\r\n\r\n"),
    "no-host": (0, b"GET / HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n"),
    "two-hosts": (8, b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
    # Passes the body limit mid-body: answered directly (direct.c), the rest never read.
    "chunked-far-over-limit": (0, b"POST /token HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + (b"400\r\n" + b"d" * 1024 + b"\r\n") * 8 + b"0\r\n\r\n"),
}

OUT.mkdir(parents=True, exist_ok=True)
for name, (control, request) in SEEDS.items():
    (OUT / f"shim-{name}").write_bytes(bytes([control]) + request)
print(f"wrote {len(SEEDS)} seeds to {OUT}")
