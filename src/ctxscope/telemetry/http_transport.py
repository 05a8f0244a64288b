"""The OTLP/HTTP exporters' transport for a plain ``http://`` endpoint: ``http.client``, not ``requests``.

The SDK's HTTP exporters (1.45) send through a transport
(``opentelemetry.exporter.http.transport``); the one they build is
``requests``'. Importing ``requests`` (with ``urllib3``, ``charset_normalizer``,
``idna``, ``certifi``) is a fifth of a one-line ``ctxscope replay``'s
instructions and more than a tenth of its CPU time, for a POST of bytes
ctxscope has encoded itself. :class:`StdlibTransport` makes that POST with
the standard library's ``http.client``, on one kept-alive connection; the
SDK's client around it (retries, backoff, ``Retry-After``, compression,
headers, timeouts) is unchanged.

It is used only where ``requests`` would send the same request the same
way (:func:`stdlib_transport_for`), and the SDK's own transport everywhere
else:

- the endpoint is ``http://`` (TLS, certificates, ``requests``' CA bundle
  and ``REQUESTS_CA_BUNDLE`` stay ``requests``'), with no user info
  (``requests`` would turn it into basic auth), no fragment, and only
  characters ``requests`` would not quote again;
- no proxy for it: no ``http_proxy`` or ``all_proxy`` (``no_proxy`` or
  ``https_proxy`` alone change nothing for an ``http://`` URL in
  ``requests``), and on macOS and Windows none in the system's settings
  (which ``requests`` reads through ``urllib.request.getproxies``); no ``NETRC`` and no
  ``~/.netrc`` or ``~/_netrc`` (``requests`` would add its credentials),
  no credential provider session (``OTEL_PYTHON_EXPORTER_OTLP_HTTP_*CREDENTIAL_PROVIDER``),
  and no session, certificate or transport given by the caller.

As ``requests`` does for the SDK, it follows no redirect (a 3xx is the
SDK's success), and reports an error raised before a response as the
result's ``error``; an ``OSError`` (refused, reset, timed out, name not
resolved) or a broken HTTP exchange is a connection error, which the SDK
retries, except a body cut off after the response's status came
(:class:`ResponseBodyError`, requests' ``ChunkedEncodingError``).
"""

from __future__ import annotations

import http.client
import os
import string
import sys
import threading
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

try:
    from opentelemetry.exporter.http.transport._base import BaseHTTPResult, BaseHTTPTransport
except ImportError:  # an SDK before pluggable transports (pyproject allows >= 1.30): its exporters take no
    # ``_transport``, so _takes_transport says no and nothing here is made; the classes still need bases.
    BaseHTTPResult = BaseHTTPTransport = object  # type: ignore[misc,assignment]

from ctxscope.config import http_client_environment

__all__ = ["ResponseBodyError", "StdlibTransport", "stdlib_transport_for"]

# What requests' requote_uri leaves as it is (its "safe" set and the unreserved characters),
# '%' left out: a URL with an escape (which requests may rewrite) goes through requests.
_UNQUOTED = frozenset(string.ascii_letters + string.digits + "-._~" + "!$&'()*+,/:;=?@[]")


@dataclass(frozen=True, slots=True)
class StdlibHTTPResult(BaseHTTPResult):
    """A response read whole (status, reason, headers, body), or the error raised before one."""

    body: bytes = b""
    response_headers: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    def content(self) -> bytes:
        return self.body

    def headers(self) -> Mapping[str, str]:
        return self.response_headers


class ResponseBodyError(Exception):
    """A response's body broken off after its status and headers came (short of its length, reset): not a
    connection error, so the SDK does not send again a batch the collector has answered (requests raises
    ``ChunkedEncodingError`` there, which the SDK does not retry either)."""


class _Headers(Mapping[str, str]):
    """A response's headers, case-insensitive, each name's values joined by ", " (what the SDK's results give)."""

    def __init__(self, message: Any) -> None:
        joined: dict[str, str] = {}
        for name, value in message.items():
            key = name.lower()
            joined[key] = f"{joined[key]}, {value}" if key in joined else value
        self._joined = joined

    def __getitem__(self, name: str) -> str:
        return self._joined[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._joined)

    def __len__(self) -> int:
        return len(self._joined)


class StdlibTransport(BaseHTTPTransport):
    """POSTs over one kept-alive ``http.client.HTTPConnection`` to one ``http://`` origin."""

    def __init__(self, host: str, port: int | None) -> None:
        # The port always given: with none, http.client reads "::1" (an IPv6 literal's hostname, from
        # "http://[::1]/...") as host "::" and port 1.
        self._host, self._port = host, http.client.HTTP_PORT if port is None else port
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()  # one request at a time on the connection
        self._closing = False  # close() came while a request held the lock: that request closes after it
        _LIVE.add(self)

    def after_fork_in_child(self) -> None:
        """A forked child's own connection and lock: the parent's socket is not shared (two processes'
        requests and responses interleaved on it), and a lock that another thread of the parent held
        mid-request at the fork is never released in the child (its exports and shutdown would wait on it
        for ever)."""
        self._lock = threading.Lock()
        self._closing = False
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()  # the child's copy of the descriptor: the parent's connection stays open

    def request(self, method: str, url: str, *, headers: dict[str, str] | None = None,
                timeout: float | None = None, data: bytes | None = None) -> BaseHTTPResult:
        if timeout is not None and timeout <= 0:
            # A spent deadline (the SDK passes what is left of it): urllib3 refuses it before sending, and
            # a socket timeout of 0 would be non-blocking (the batch written, its answer not waited for).
            return StdlibHTTPResult(error=ValueError(f"a timeout must be more than 0, not {timeout}"))
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        with self._lock:
            try:
                connection = self._connection
                if connection is None:
                    connection = self._connection = http.client.HTTPConnection(self._host, self._port,
                                                                               timeout=timeout)
                else:
                    connection.timeout = timeout  # each request's own (requests' connect and read timeout)
                    if connection.sock is not None:
                        connection.sock.settimeout(timeout)
                connection.request(method, target, body=data, headers=headers or {})
                response = connection.getresponse()
                try:
                    body = response.read()
                except TimeoutError:
                    raise  # a read timed out: a connection error, as requests' ConnectionError(ReadTimeoutError)
                except Exception as error:
                    raise ResponseBodyError(f"the response's body was cut off ({error!r})") from error
                if response.will_close or self._closing:
                    self._close()
            except Exception as error:  # noqa: BLE001 - the result carries it, as the SDK's transports do
                self._close()  # a broken or stale connection: the next request opens another
                return StdlibHTTPResult(error=error)
        return StdlibHTTPResult(status_code=response.status, reason=response.reason, body=body,
                                response_headers=_Headers(response.headers))

    def _close(self) -> None:
        self._closing = False
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def is_connection_error(self, exception: Exception | None) -> bool:
        return isinstance(exception, (OSError, http.client.HTTPException))

    def close(self) -> None:
        """Close the kept-alive connection; one in use is closed by its request when it ends (as requests'
        session closes its idle connections at once): a shutdown does not wait on a slow collector."""
        if not self._lock.acquire(blocking=False):
            self._closing = True
            return
        try:
            self._close()
        finally:
            self._lock.release()


# Every transport not yet collected, for their reset in a forked child (one hook for all, held weakly).
_LIVE: weakref.WeakSet[StdlibTransport] = weakref.WeakSet()


def _reset_after_fork() -> None:
    for transport in list(_LIVE):
        transport.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def stdlib_transport_for(endpoint: str, environ: Mapping[str, str] | None = None,
                         **given: Any) -> StdlibTransport | None:
    """A :class:`StdlibTransport` for ``endpoint``, or None where ``requests`` must send (module docstring).

    ``given``: the exporter's own arguments; a session, certificate or transport keeps the SDK's transport.
    """
    if any(value is not None for value in given.values()):
        return None
    try:
        parts = urlsplit(endpoint)
        host, port = parts.hostname, parts.port
    except ValueError:  # a bad port: the SDK's transport reports it
        return None
    if parts.scheme.lower() != "http" or not host or "@" in parts.netloc or parts.fragment or "#" in endpoint:
        return None
    if not _UNQUOTED.issuperset(endpoint):
        return None
    environment = http_client_environment(environ)
    if environment.proxies or environment.netrc or environment.credential_provider or _system_proxy():
        return None
    return StdlibTransport(host, port)


def _system_proxy() -> bool:
    """An http:// proxy in macOS's or Windows' settings, which requests (urllib's getproxies) uses where
    no variable names one; elsewhere there are none but the variables."""
    if sys.platform not in ("darwin", "win32"):
        return False
    import urllib.request  # only here: requests, which this transport replaces, imports it too

    reader = getattr(urllib.request, "getproxies_macosx_sysconf" if sys.platform == "darwin"
                     else "getproxies_registry", None)
    try:
        found = reader() if reader is not None else {}
    except Exception:  # noqa: BLE001 - a setting that cannot be read: requests may still find one
        return True
    return bool(found.get("http") or found.get("all"))


def with_stdlib_transport(sdk_exporter: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` for the SDK exporter ``sdk_exporter``, with a :class:`StdlibTransport` where one may send.

    Only for the keyword form :func:`ctxscope.setup` uses (an endpoint given, nothing positional), on an
    SDK whose exporter takes a ``_transport``.
    """
    endpoint = kwargs.get("endpoint")
    if args or not endpoint or "_transport" in kwargs or not _takes_transport(sdk_exporter):
        return kwargs
    transport = stdlib_transport_for(endpoint, **{name: kwargs.get(name) for name in _REQUESTS_ONLY})
    return kwargs if transport is None else {**kwargs, "_transport": transport}


# The exporters' arguments that only the SDK's requests transport takes.
_REQUESTS_ONLY = ("session", "certificate_file", "client_key_file", "client_certificate_file")


def _takes_transport(sdk_exporter: type) -> bool:
    import inspect

    try:
        return "_transport" in inspect.signature(sdk_exporter.__init__).parameters  # type: ignore[misc]
    except (TypeError, ValueError):
        return False
