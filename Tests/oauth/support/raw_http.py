"""HTTP to a broker over a plain socket (the API proxy's tests): a GET sent exactly as written, and
a request whose answer is read head first, or not at all."""

import socket


def raw_get(broker, target: str, token: str) -> int:
    """The status of a GET sent exactly as written (no client-side normalisation of the path)."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as connection:
        connection.sendall(f"GET {target} HTTP/1.1\r\nHost: {broker.host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def open_request(broker, target: str, token: str, source: str = "127.0.0.1", method: str = "GET") -> socket.socket:
    """A connection that sends a request without a body (a GET by default) and reads nothing yet
    (a small receive window)."""
    connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    connection.bind((source, 0))
    connection.settimeout(10)
    connection.connect(("127.0.0.1", broker.port))
    length = "" if method in ("GET", "HEAD") else "Content-Length: 0\r\n"
    connection.sendall(f"{method} {target} HTTP/1.1\r\nHost: {broker.host}\r\nAuthorization: Bearer {token}\r\n{length}\r\n".encode())
    return connection


def read_head(connection: socket.socket) -> tuple[int, str]:
    """The status and head of the answer, reading byte by byte so that no body is taken."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = connection.recv(1)
        if not byte:
            break
        head += byte
    return int(head.split(b" ", 2)[1]), head.decode("latin-1")
