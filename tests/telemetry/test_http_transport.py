"""The OTLP/HTTP exporters' standard-library transport: where it sends, and that it sends as requests would."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from opentelemetry.exporter.http.transport._requests import RequestsHTTPTransport
from opentelemetry.exporter.otlp.common.http import _OTLPHTTPClient

from ctxscope.config import http_client_environment
from ctxscope.telemetry.http_span_exporter import HttpSpanExporter
from ctxscope.telemetry.http_transport import ResponseBodyError, StdlibTransport, stdlib_transport_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_proxy_or_netrc(monkeypatch, tmp_path):
    """The machine's own proxy variables and ~/.netrc decide nothing here."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name == "NETRC" or "CREDENTIAL_PROVIDER" in name:
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.mark.parametrize("endpoint", [
    "https://collector:4318/v1/traces",  # TLS: requests' certificates
    "http://user:secret@collector:4318/v1/traces",  # requests sends the user info as basic auth
    "http://collector:4318/v1/traces#part",  # requests drops a fragment
    "http://collector:4318/v1/tr%61ces",  # requests rewrites an escape
    "http://collector:4318/v1/my traces",  # requests quotes the space
    "http://collector:notaport/v1/traces",
])
def test_requests_keeps_what_it_would_send_differently(endpoint):
    assert stdlib_transport_for(endpoint) is None


def test_a_plain_http_endpoint_gets_the_standard_library_transport():
    transport = stdlib_transport_for("http://127.0.0.1:4318/v1/traces")
    assert isinstance(transport, StdlibTransport)
    assert (transport._host, transport._port) == ("127.0.0.1", 4318)
    ipv6 = stdlib_transport_for("http://[::1]/v1/metrics")
    assert ipv6 is not None and (ipv6._host, ipv6._port) == ("::1", 80)


@pytest.mark.parametrize("variable, value", [
    ("http_proxy", "http://proxy:3128"), ("HTTP_PROXY", "http://proxy:3128"),
    ("ALL_PROXY", "socks5://proxy"), ("all_proxy", "socks5://proxy"), ("NETRC", "/somewhere/netrc"),
    ("OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER", "mine"),
    ("OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER", "mine"),
])
def test_the_environment_requests_acts_on_keeps_requests(monkeypatch, variable, value):
    assert stdlib_transport_for("http://127.0.0.1:4318/v1/traces") is not None
    monkeypatch.setenv(variable, value)
    assert stdlib_transport_for("http://127.0.0.1:4318/v1/traces") is None


@pytest.mark.parametrize("variables", [{"no_proxy": "localhost"}, {"NO_PROXY": "*"},
                                       {"https_proxy": "http://proxy:3128", "no_proxy": "collector"}])
def test_what_requests_does_not_proxy_an_http_url_with_keeps_the_standard_library(monkeypatch, variables):
    """no_proxy alone, or https_proxy: requests' own choice for an http:// URL is no proxy, so no reason
    to keep it (these kept it: requests imported for nothing)."""
    import requests

    url = "http://collector:4318/v1/traces"
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    chosen = requests.Session().merge_environment_settings(url, {}, None, None, None)["proxies"]
    assert requests.utils.select_proxy(url, chosen) is None  # requests would connect directly
    assert stdlib_transport_for(url) is not None


@pytest.mark.parametrize("platform, reader", [("darwin", "getproxies_macosx_sysconf"),
                                              ("win32", "getproxies_registry")])
def test_a_system_proxy_on_macos_or_windows_keeps_requests(monkeypatch, platform, reader):
    """Where no variable names a proxy, requests takes the system's (urllib's getproxies): macOS's
    settings, Windows' registry. Neither can run here: the platform and its reader are stood in for."""
    import urllib.request

    url = "http://collector:4318/v1/traces"
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(urllib.request, reader, lambda: {"https": "http://proxy:3128"}, raising=False)
    assert stdlib_transport_for(url) is not None  # a proxy for https:// only
    monkeypatch.setattr(urllib.request, reader, lambda: {"http": "http://proxy:3128"}, raising=False)
    assert stdlib_transport_for(url) is None


def test_a_netrc_file_keeps_requests(tmp_path):
    assert not http_client_environment({"HOME": str(tmp_path)}).netrc
    (tmp_path / ".netrc").write_text("machine collector login a password b\n")
    assert http_client_environment({"HOME": str(tmp_path)}).netrc
    assert stdlib_transport_for("http://collector:4318/v1/traces") is None


def test_a_session_or_certificate_given_keeps_requests():
    import requests

    exporter = HttpSpanExporter(endpoint="http://127.0.0.1:4318/v1/traces", session=requests.Session())
    assert isinstance(exporter._client._transport, RequestsHTTPTransport)
    exporter = HttpSpanExporter(endpoint="http://127.0.0.1:4318/v1/traces")
    assert isinstance(exporter._client._transport, StdlibTransport)


# -- against a server ------------------------------------------------------------------

class _Server:
    """An HTTP server answering each POST with the next of ``replies`` ((status, headers), the last repeated)."""

    def __init__(self, replies: list[tuple[int, dict[str, str]]]) -> None:
        self.replies = replies
        self.bodies: list[bytes] = []
        self.request_headers: list[dict[str, str]] = []
        self.connections = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                server.connections += 1
                super().setup()

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                server.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                server.request_headers.append({k.lower(): v for k, v in self.headers.items()})
                status, headers = server.replies[min(len(server.bodies), len(server.replies)) - 1]
                self.send_response(status)
                for key, value in {"Content-Length": "0", **headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                if headers.get("Connection") == "close":
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/traces"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_with() -> Iterator[Any]:
    made: list[_Server] = []

    def make(*replies: tuple[int, dict[str, str]]) -> _Server:
        made.append(_Server(list(replies)))
        return made[-1]

    yield make
    for server in made:
        server.close()


def _client(url: str, **kwargs: Any) -> _OTLPHTTPClient:
    transport = stdlib_transport_for(url)
    assert transport is not None
    return _OTLPHTTPClient(transport=transport, endpoint=url, kind="spans",
                           headers={"content-type": "application/x-protobuf", "x-tenant": "t1"}, **kwargs)


def test_exports_on_one_kept_alive_connection_with_the_given_headers(server_with):
    server = server_with((200, {}))
    client = _client(server.url)
    for n in range(3):
        assert client.export(b"batch %d" % n).success
    assert server.bodies == [b"batch 0", b"batch 1", b"batch 2"]
    assert server.connections == 1
    assert server.request_headers[0]["x-tenant"] == "t1"
    assert server.request_headers[0]["content-type"] == "application/x-protobuf"
    assert server.request_headers[0]["host"] == server.url.split("/")[2]
    client.shutdown()


def test_a_server_closing_each_connection_still_gets_every_export(server_with):
    server = server_with((200, {"Connection": "close"}))
    client = _client(server.url)
    for n in range(3):
        assert client.export(b"batch %d" % n).success
    assert server.bodies == [b"batch 0", b"batch 1", b"batch 2"] and server.connections == 3


def test_retry_after_is_read_from_the_response(server_with):
    """503 with Retry-After: 0 is retried at once (the SDK's backoff would wait about a second), then 200."""
    import time

    server = server_with((503, {"Retry-After": "0"}), (200, {}))
    client = _client(server.url, timeout=5.0)
    started = time.monotonic()
    result = client.export(b"batch")
    assert result.success and result.status_code == 200
    assert time.monotonic() - started < 0.7
    assert server.bodies == [b"batch", b"batch"]


def test_a_refused_connection_is_a_connection_error():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = stdlib_transport_for(f"http://127.0.0.1:{port}/v1/traces")
    assert transport is not None
    result = transport.request("POST", f"http://127.0.0.1:{port}/v1/traces", data=b"x", timeout=1.0)
    assert result.status_code is None and isinstance(result.error, ConnectionRefusedError)
    assert transport.is_connection_error(result.error)
    assert not transport.is_connection_error(ValueError("a header with a newline"))


def test_response_headers_are_case_insensitive(server_with):
    server = server_with((200, {"X-Seen": "a", "Retry-After": "3"}))
    transport = stdlib_transport_for(server.url)
    assert transport is not None
    headers = transport.request("POST", server.url, data=b"x", timeout=5.0).headers()
    assert headers.get("retry-after") == "3" and headers["RETRY-AFTER"] == "3" and headers["x-seen"] == "a"


def test_a_4xx_is_returned_with_its_status_and_reason(server_with):
    server = server_with((400, {}))
    client = _client(server.url)
    result = client.export(b"batch")
    assert not result.success and result.status_code == 400 and result.reason == "Bad Request"
    assert server.bodies == [b"batch"]  # not retried


def test_replay_does_not_import_requests(tmp_path):
    """A replay to a plain http:// endpoint sends without importing requests (what this transport saves)."""
    pytest.importorskip("oteltest.sink")
    sys.path.insert(0, str(ROOT / "tests"))
    from _otlp_sink import Receiver, spans_of, wait_for

    transcript = tmp_path / "s.jsonl"
    transcript.write_text(
        '{"type":"user","sessionId":"s1","uuid":"u1","timestamp":"2026-01-01T00:00:00Z",'
        '"message":{"role":"user","content":"hi"}}\n'
        '{"type":"assistant","sessionId":"s1","uuid":"a1","parentUuid":"u1","timestamp":"2026-01-01T00:00:01Z",'
        '"requestId":"r1","message":{"id":"m1","role":"assistant","model":"claude-sonnet-4-5","content":'
        '[{"type":"text","text":"hello"}],"usage":{"input_tokens":10,"output_tokens":2}}}\n')
    code = ("import sys; from ctxscope.cli import run\n"
            "try:\n    run()\nfinally:\n    print('requests' in sys.modules, file=sys.stderr)\n")
    with Receiver("http/protobuf") as receiver:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CTXSCOPE_STORE": "off",
               "PYTHONPATH": str(ROOT / "src"), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
        run = subprocess.run([sys.executable, "-c", code, "replay", "--tokenizer", "chars", str(transcript)],
                             env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        wait_for(lambda: len(spans_of(receiver.handler.traces)) >= 2 and receiver.handler.metrics)
    assert run.stderr.strip().splitlines()[-1] == "False"
    assert {span.name for span in spans_of(receiver.handler.traces)} >= {"chat claude-sonnet-4-5", "capture-start"}


def test_an_sdk_without_pluggable_transports_keeps_its_own(tmp_path):
    """Before opentelemetry-exporter-http-transport (pyproject allows the SDK from 1.30) the module still
    imports, and an exporter that takes no ``_transport`` gets its arguments unchanged."""
    code = ("import sys\n"
            "sys.modules['opentelemetry.exporter.http.transport._base'] = None  # not importable\n"
            "from ctxscope.telemetry.http_transport import with_stdlib_transport\n"
            "class OldExporter:\n"
            "    def __init__(self, endpoint=None, headers=None): pass\n"
            "kwargs = {'endpoint': 'http://collector:4318/v1/traces'}\n"
            "print(with_stdlib_transport(OldExporter, (), kwargs) is kwargs)\n")
    run = subprocess.run([sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                             "PYTHONPATH": str(ROOT / "src")},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"


# -- an IPv6 literal, a fork, a close during a request ------------------------------------

def test_an_ipv6_literal_without_a_port_is_dialled_on_port_80(monkeypatch):
    """http.client given no port reads "::1" as host "::" and port 1; the transport must dial [::1]:80."""
    import socket

    dialled: list[tuple[str, int]] = []

    def refuse(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        dialled.append(address)
        raise ConnectionRefusedError(111, "refused here")

    monkeypatch.setattr(socket, "create_connection", refuse)
    transport = stdlib_transport_for("http://[::1]/v1/traces")
    assert transport is not None
    result = transport.request("POST", "http://[::1]/v1/traces", data=b"x", timeout=1.0)
    assert isinstance(result.error, ConnectionRefusedError)
    assert dialled == [("::1", 80)]


def test_an_ipv6_literal_with_a_port_reaches_the_server():
    import socket

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")

    class V6Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        seen: list[tuple[str, bytes]] = []

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            Handler.seen.append((self.headers["Host"], self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = V6Server(("::1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://[::1]:{httpd.server_address[1]}/v1/traces"
        transport = stdlib_transport_for(url)
        assert transport is not None
        assert transport.request("POST", url, data=b"v6", timeout=5.0).status_code == 200
        assert Handler.seen == [(f"[::1]:{httpd.server_address[1]}", b"v6")]
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_sends_on_its_own_connection_even_if_the_lock_was_held(server_with):
    """A fork while the batch thread is mid-request (the lock held) must not leave the child's exports and
    shutdown waiting for ever, nor share the parent's socket; the parent's connection stays usable."""
    import time

    server = server_with((200, {}))
    transport = stdlib_transport_for(server.url)
    assert transport is not None
    assert transport.request("POST", server.url, data=b"parent 1", timeout=5.0).status_code == 200
    transport._lock.acquire()  # as the exporting thread holds it during a request
    pid = os.fork()
    if pid == 0:  # the child: only this thread, a copy of the held lock
        code = 1
        try:
            result = transport.request("POST", server.url, data=b"child", timeout=5.0)
            transport.close()
            code = 0 if result.status_code == 200 else 2
        finally:
            os._exit(code)
    transport._lock.release()
    deadline = time.monotonic() + 10
    while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if waited[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the child's request waited on the lock its parent held at the fork")
    assert os.waitstatus_to_exitcode(waited[1]) == 0
    assert transport.request("POST", server.url, data=b"parent 2", timeout=5.0).status_code == 200
    assert server.bodies == [b"parent 1", b"child", b"parent 2"]
    assert server.connections == 2  # the parent's kept alive across the fork, the child's own


def test_close_during_a_request_does_not_wait_for_it():
    """The SDK's shutdown closes the transport after its batch thread's join times out: with a collector
    slow to answer, close() must return at once (requests' session does), the request still answered."""
    import socket
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/traces"

    received, closed = threading.Event(), threading.Event()

    def slow_collector() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            received.set()
            closed.wait(10)  # the answer only once close() returned
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            time.sleep(0.5)

    threading.Thread(target=slow_collector, daemon=True).start()
    transport = stdlib_transport_for(url)
    assert transport is not None
    results: list[Any] = []
    sender = threading.Thread(target=lambda: results.append(transport.request("POST", url, data=b"x",
                                                                               timeout=5.0)))
    sender.start()
    assert received.wait(10)  # the request sent, its answer held back until close() returns
    started = time.monotonic()
    transport.close()
    # A close that waited for the request would return only at the request's 5 s timeout.
    assert time.monotonic() - started < 4.0
    closed.set()
    sender.join(5)
    assert results and results[0].status_code == 200
    assert transport._connection is None  # closed by the request when it ended
    listener.close()


def test_a_body_cut_off_after_the_status_is_not_sent_again():
    """A collector that answered (status and headers) but whose body broke off has the batch: requests
    raises ChunkedEncodingError there, which the SDK does not retry; nor must this transport's error be a
    connection error (it was http.client's IncompleteRead: the batch was posted 6 times in 3 s)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/traces"
    posts: list[bytes] = []

    def cut_off_collector() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                received = b""
                while not received.endswith(b"batch"):  # the request's head, then its 5-byte body
                    received += connection.recv(65536)
                posts.append(received)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")  # 3 bytes of 10

    threading.Thread(target=cut_off_collector, daemon=True).start()
    client = _client(url, timeout=3.0)
    result = client.export(b"batch")
    listener.close()
    assert not result.success and result.status_code is None
    assert isinstance(result.error, ResponseBodyError)
    assert len(posts) == 1


def test_a_spent_timeout_sends_nothing(server_with):
    """The SDK passes what is left of its deadline, 0.0 once spent: requests (urllib3) refuses a timeout of
    0 with a ValueError before sending, not a connection error. A socket timeout of 0 is non-blocking: the
    batch was written on the kept-alive connection and the answer not waited for."""
    server = server_with((200, {}))
    transport = stdlib_transport_for(server.url)
    assert transport is not None
    assert transport.request("POST", server.url, data=b"first", timeout=5.0).status_code == 200
    result = transport.request("POST", server.url, data=b"late", timeout=0.0)
    assert result.status_code is None and isinstance(result.error, ValueError)
    assert not transport.is_connection_error(result.error)
    assert transport.request("POST", server.url, data=b"third", timeout=5.0).status_code == 200
    assert server.bodies == [b"first", b"third"]
