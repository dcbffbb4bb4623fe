"""Plain HTTP(S) requests to loopback servers, ignoring proxy settings."""

from __future__ import annotations

import http.client
import ssl
import urllib.parse
from collections.abc import Mapping


def request(
    method: str,
    url: str,
    *,
    context: ssl.SSLContext | None = None,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 5.0,
) -> tuple[int, bytes]:
    """Send one request and return (status, body). Connection errors raise ``OSError``."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(host, parts.port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(host, parts.port, timeout=timeout)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    try:
        connection.request(method, target, body=body, headers=dict(headers or {}))
        response = connection.getresponse()
        return response.status, response.read()
    except http.client.HTTPException as err:
        raise OSError(f"{method} {url}: {err!r}") from err
    finally:
        connection.close()


def probe(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bytes | None:
    """The body of a 200 answer to ``GET url``, or None on any other answer or error."""
    try:
        status, body = request("GET", url, context=context, timeout=timeout)
    except OSError:
        return None
    return body if status == 200 else None


def insecure_context() -> ssl.SSLContext:
    """TLS without verification, for health checks of components with self-signed certs."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
