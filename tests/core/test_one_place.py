"""Each kind of rule lives in one module: the grep the architecture issue asks for, as a test."""

from __future__ import annotations

import ast
import re

from _paths import ROOT

from ctxscope.core import apis

SRC = ROOT / "src" / "ctxscope"


def _sources() -> dict[str, str]:
    return {str(p.relative_to(SRC)): p.read_text(encoding="utf-8") for p in sorted(SRC.rglob("*.py"))}


def _environment_reads(text: str) -> list[str]:
    """Where a module reads the environment: ``os.environ``/``os.getenv`` (under any name ``os`` is
    imported as), ``from os import environ``/``getenv``, ``posix.environ``."""
    tree = ast.parse(text)
    os_names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names if alias.name in ("os", "posix")}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "posix"):
            found += [f"from {node.module} import {a.name}" for a in node.names if a.name in _ENVIRONMENT]
        elif (isinstance(node, ast.Attribute) and node.attr in _ENVIRONMENT and isinstance(node.value, ast.Name)
              and node.value.id in os_names):
            found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    return found


_ENVIRONMENT = {"environ", "environb", "getenv", "getenvb"}


def test_environment_variables_are_read_in_config_alone():
    readers = {name: found for name, text in _sources().items() if (found := _environment_reads(text))}
    assert set(readers) == {"config.py"}, readers


def test_the_environment_check_finds_every_way_of_reading_it():
    """The reads it is for, under the names a module may give them; a parameter called environ is no read."""
    for text in ("import os\nos.environ.get('X')", "import os\nos.getenv('X')", "import os as o\no.environ['X']",
                 "from os import environ", "from os import getenv as g", "import os\nx = os.environb"):
        assert _environment_reads(text), text
    for text in ("def f(environ=None):\n    return environ.get('X')", "import os\nos.path.join('a')",
                 "from ctxscope.config import settings"):
        assert not _environment_reads(text), text


def test_api_ids_are_written_in_their_wire_format_modules_alone():
    ids = [wire.id for wire in apis.WIRE_FORMATS]
    writers = {name for name, text in _sources().items() for api in ids if f'"{api}"' in text or f"'{api}'" in text}
    assert writers and all(name.startswith("core/apis/") for name in writers), writers


def test_api_ids_are_string_constants_of_core_apis_alone():
    """No string constant outside core/apis equals an API id, however it is quoted or built into a tuple."""
    ids = {wire.id for wire in apis.WIRE_FORMATS}
    found = {(name, node.lineno) for name, text in _sources().items() if not name.startswith("core/apis/")
             for node in ast.walk(ast.parse(text))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ids}
    assert found == set(), sorted(found)


# An API id compared with one of the API_* constants (``==``, ``!=``, ``is``, ``in``), on either side and
# under any name (``api``, ``call.api``, ``wire.id``), or an id literal compared with ``api``: a rule that
# belongs to a format. No file is allowed one: a rule of one API is a field or a function of its WireFormat.
_API_BRANCH = re.compile(r"""\bapi\s*[!=]=\s*["'][a-z]+\.[a-z_]+["']"""
                         r"""|(?:[!=]=|\bin\b|\bis\b)\s*[(\[{]?\s*(?:\w+\.)?API_[A-Z_]+\b"""
                         r"""|\bAPI_[A-Z_]+\s*(?:[!=]=|\bis\b)""")


def _api_branches() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, text in _sources().items():
        if name.startswith("core/apis/"):
            continue
        lines = [line.strip() for line in text.splitlines() if _API_BRANCH.search(line)]
        if lines:
            found[name] = lines
    return found


def test_no_module_outside_apis_branches_on_an_api_id():
    """Code that needs a rule of one API asks its WireFormat (a field or a function), not ``api == API_X``."""
    assert _api_branches() == {}


def test_the_branch_pattern_finds_what_it_is_for():
    """The pattern above catches the shapes of branch it is meant to, and not a cache-key comparison,
    a table keyed by API, or an API id handed on."""
    for line in ('if api == API_ANTHROPIC:', 'x = "a" if call.api == API_OPENAI_RESPONSES else "b"',
                 "if self.api != 'openai.chat':", "if API_GEMINI == api:", "if wire.id == apis.API_ANTHROPIC:",
                 "if api in (API_OPENAI_CHAT, API_OPENAI_RESPONSES):", "if fmt.id not in {API_GEMINI}:",
                 "if endpoint.api is API_OLLAMA:"):
        assert _API_BRANCH.search(line), line
    for line in ("if api != self._api or model != self._model:", "same_api = api == self._api",
                 'CHAT = Endpoint(API_OPENAI_CHAT, "openai")', "_APIS = {API_CHAT: CHAT}",
                 "tracker.observe_request(body, API_OPENAI_CHAT, provider=provider)"):
        assert not _API_BRANCH.search(line), line


# Writing a span: opening one, putting attributes, events or a status on one, ending one. ``match.end()``
# (a regex match) and ``add_span_processor`` (setting the SDK up) are not span writing and do not match;
# neither does the content log event (``logger.emit``: a log record, SPEC section 7), which is not a span.
_SPAN_WRITE = re.compile(r"\.(?:start_span|start_as_current_span|add_event|set_attributes?|set_status|"
                         r"record_exception|update_name)\(|\bspan\.end\(|\.end\(\s*end_time")
# The one span writer (issue 11): every span ctxscope writes, and what goes on it.
_SPAN_WRITER = "telemetry/spans.py"


def test_one_module_writes_spans():
    """Call spans, markers, companions, change events and usage attributes are written by telemetry/spans.py alone."""
    writers = {name: [line.strip() for line in text.splitlines() if _SPAN_WRITE.search(line)]
               for name, text in _sources().items()}
    writers = {name: lines for name, lines in writers.items() if lines}
    assert set(writers) == {_SPAN_WRITER}, {k: v for k, v in writers.items() if k != _SPAN_WRITER}


def test_the_span_write_pattern_finds_what_it_is_for():
    """The pattern catches every way of writing a span, and not a regex match's end or the SDK's set-up."""
    for line in ("span = self.tracer.start_span(name)", "with tracer.start_as_current_span('x'):",
                 "self.span.add_event(name, attrs)", "span.set_attribute('k', 1)", "span.set_attributes(a)",
                 "self.span.set_status(Status(StatusCode.ERROR))", "span.end()", "companion.end(end_time=end)",
                 "span.record_exception(exc)", "span.update_name('chat')"):
        assert _SPAN_WRITE.search(line), line
    for line in ("start = match.end()", "provider.add_span_processor(processor)", "self._set_status()",
                 "logger.emit(record)", "text.find(tag, match.end())"):
        assert not _SPAN_WRITE.search(line), line
