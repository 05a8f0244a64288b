"""What agent text is: rules, skills, environment, summaries; tool parts and call references."""

from __future__ import annotations

import json

from conftest import CORPUS, requires_corpus
from ctxscope.core.classify import Segment, classify_text, mcp_name, normalise_path, tool_part, tool_reference


def parts(text: str, role: str = "user") -> list[tuple[str | None, str]]:
    segments = classify_text(text, role)
    assert "".join(s.text for s in segments) == text  # nothing lost, nothing doubled
    return [(s.part, s.text) for s in segments]


def test_ordinary_text_is_one_default_segment():
    """Text with no marker comes back whole with part None (the caller's default)."""
    assert classify_text("Please fix the failing test.") == [Segment("Please fix the failing test.")]


def test_claude_code_context_reminder_splits_rules_by_file():
    """Two CLAUDE.md files inside Claude Code's reminder: two rules items, the rest environment."""
    head = ("<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
            "# claudeMd\nCodebase and user instructions are shown below.\n\n")
    user_md = ("Contents of /home/u/.claude/CLAUDE.md (user's private global instructions for all projects):\n\n"
               "Be terse.\n\n")
    project_md = ("Contents of /repo/CLAUDE.md (project instructions, checked into the codebase):\n\n"
                  "# Build\nuv run pytest\n")
    tail = ("# currentDate\nToday's date is 2025-06-01.\n\n"
            "      IMPORTANT: this context may or may not be relevant.\n</system-reminder>\n")
    assert parts(head + user_md + project_md + tail) == [
        ("environment", head), ("rules/CLAUDE.md", user_md), ("rules/CLAUDE.md", project_md), ("environment", tail)]
    labels = [s.label for s in classify_text(head + user_md + project_md + tail)]
    assert labels == [None, "CLAUDE.md", "CLAUDE.md", None]


def test_auto_memory_file_is_rules_by_its_name():
    """Claude Code's auto-memory file (MEMORY.md) is a rules part named after the file."""
    text = ("<system-reminder>\nContents of /home/u/.claude/projects/-repo/memory/MEMORY.md "
            "(user's auto-memory, persists across conversations):\n\n- prefers uv\n</system-reminder>")
    assert [p for p, _ in parts(text)] == ["environment", "rules/MEMORY.md", "environment"]


def test_reminder_then_user_words_are_two_segments():
    """A reminder followed by what the person typed: environment, then default text."""
    assert parts("<system-reminder>\nThe user opened a.py\n</system-reminder>\nWhy does this fail?") == [
        ("environment", "<system-reminder>\nThe user opened a.py\n</system-reminder>"),
        (None, "\nWhy does this fail?")]


def test_codex_agents_md_user_instructions_and_environment_context():
    """Codex: '# AGENTS.md instructions for', <user_instructions> and <environment_context>."""
    agents = "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nRun make test.\n</INSTRUCTIONS>"
    assert classify_text(agents) == [Segment(agents, "rules/AGENTS.md", "AGENTS.md")]
    legacy = "<user_instructions>\nRun make test.\n</user_instructions>"
    assert parts(legacy) == [("rules/AGENTS.md", legacy)]
    env = "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>zsh</shell>\n</environment_context>"
    assert parts(env) == [("environment", env)]


def test_system_prompt_env_block_and_git_status():
    """Claude Code's system prompt: <env> and the trailing gitStatus snapshot are environment."""
    intro, mid = "You are Claude Code.\n", "\nBe careful.\n"
    env = "<env>\nWorking directory: /repo\nPlatform: linux\n</env>"
    git = "gitStatus: This is the git status at the start of the conversation.\nCurrent branch: main\n"
    assert parts(intro + env + mid + git, "system") == [
        (None, intro), ("environment", env), (None, mid), ("environment", git)]


def test_compaction_summaries():
    """Claude Code's continuation message, Codex's summary prefix and a <summary> block are summaries."""
    claude = "This session is being continued from a previous conversation that ran out of context. ..."
    codex = "Another language model started to solve this problem and produced a summary of its thinking process. ..."
    tagged = "<summary>\nWe fixed the parser.\n</summary>"
    for text in (claude, codex, tagged):
        assert parts(text) == [("summaries", text)]


def test_summary_inside_a_task_notification_is_not_a_compaction():
    """Claude Code's <task-notification> holds a <summary> of a background task: it stays the prompt."""
    text = ('<task-notification>\n<task-id>b07</task-id>\n<status>completed</status>\n'
            '<summary>Monitor "PR #140 check transitions" stream ended</summary>\n</task-notification>')
    assert parts(text) == [(None, text)]


def test_html_summary_in_a_tool_result_is_not_a_compaction():
    """<details><summary> inside a tool result stays the result's text."""
    html = "<details><summary>Click</summary>body</details>"
    assert parts(html, "tool") == [(None, html)]


def test_skills_index_and_bodies():
    """Skill indexes go to skills/index; <skill> and SKILL.md bodies to skills/<name>."""
    index = "<skills_instructions>\n## Skills\n- pdf: read PDFs (file: /s/pdf/SKILL.md)\n</skills_instructions>"
    assert parts(index, "developer") == [("skills/index", index)]
    body = "<skill>\n<name>pdf</name>\n<path>/s/pdf/SKILL.md</path>\nUse pypdf.\n</skill>"
    assert classify_text(body) == [Segment(body, "skills/pdf", "pdf")]
    claude = "Base directory for this skill: /home/u/.claude/skills/my-worktree-actors\n\n# Actors\n..."
    assert classify_text(claude) == [Segment(claude, "skills/my-worktree-actors", "my-worktree-actors")]
    listing = ("<system-reminder>\nThe following skills are available for use with the Skill tool:\n\n"
               "- pdf\n</system-reminder>")
    assert parts(listing) == [("skills/index", listing)]


def test_tool_results_only_lose_appended_reminders():
    """A result that reads a CLAUDE.md stays a result; the harness's reminder after it is environment."""
    body = "Contents of /repo/CLAUDE.md (project instructions):\n\nUse uv.\n"
    reminder = ("<system-reminder>\nWhenever you read a file, you should consider whether it looks malicious.\n"
                "</system-reminder>\n")
    assert parts(body + reminder, "tool") == [(None, body), ("environment", reminder)]


def test_tool_results_split_every_closed_reminder_in_order():
    """Each reminder runs from its opening to the next closing tag; one opened inside it is part of
    it, and one never closed stays in the result's own text."""
    first = "<system-reminder>\nThe user opened a.py\n</system-reminder>"
    second = "<system-reminder> stray\n<system-reminder>\nTodo list changed\n</system-reminder>"
    assert parts("out 1\n" + first + "\nout 2 " + second, "tool") == [
        (None, "out 1\n"), ("environment", first), (None, "\nout 2 "), ("environment", second)]
    assert parts(first + " out <system-reminder> no end", "tool") == [
        ("environment", first), (None, " out <system-reminder> no end")]


def test_tool_results_know_a_reminder_only_by_its_exact_opening_tag():
    """Only ``<system-reminder>`` as written opens one (the str.find of classify, as sre matched it):
    other cases, a space or attributes in the tag leave the result's text whole; brackets around
    it, an empty one and one opened inside another are cut where the first closing tag is."""
    for text in ('<System-Reminder>x</System-Reminder>', '<system-reminder >x</system-reminder>',
                 '<system-reminder a="1">x</system-reminder>', 'x</system-reminder>'):
        assert parts(text, "tool") == [(None, text)]
    assert parts("<<system-reminder>>x</system-reminder>>", "tool") == [
        (None, "<"), ("environment", "<system-reminder>>x</system-reminder>"), (None, ">")]
    assert parts("<system-reminder></system-reminder>", "tool") == [
        ("environment", "<system-reminder></system-reminder>")]
    nested = "a<system-reminder>b<system-reminder>c</system-reminder>d</system-reminder>"
    assert parts(nested, "tool") == [
        (None, "a"), ("environment", "<system-reminder>b<system-reminder>c</system-reminder>"),
        (None, "d</system-reminder>")]


def test_assistant_text_is_not_classified():
    """The model's own words that mention AGENTS.md instructions stay assistant text."""
    text = "# AGENTS.md instructions for /repo were followed."
    assert classify_text(text, "assistant") == [Segment(text)]


def test_mcp_names_and_tool_parts():
    """mcp__<server>__<tool>: the first double underscore ends the server name."""
    assert mcp_name("mcp__claude_ai_Google_Drive__complete_authentication") == (
        "claude_ai_Google_Drive", "complete_authentication")
    assert tool_part("mcp__plugin_clmail_clmail__terminal") == "tools/mcp/plugin_clmail_clmail/terminal"
    assert tool_part("mcp__lonely") == "tools/mcp__lonely"
    assert tool_part("Read") == "tools/Read"
    assert tool_part("search", "docs") == "tools/mcp/docs/search"


def test_tool_references():
    """References: path normalised, command collapsed, noise dropped, other keys sorted, long values hashed."""
    assert tool_reference("Read", {"file_path": "./src/../src/app.py"}) == "Read:file_path=src/app.py"
    assert tool_reference("Read", '{"limit": 50, "file_path": "a.py", "offset": 10}') == \
        "Read:file_path=a.py,limit=50,offset=10"
    assert tool_reference("Bash", {"command": "git  status\n", "description": "status", "timeout": 5}) == \
        "Bash:command=git status"
    assert tool_reference("shell", {"command": ["bash", "-lc", "cat  x.py"], "workdir": "/r"}) == \
        "shell:command=cat x.py"
    assert tool_reference("exec_command", {"cmd": "rg foo", "yield_time_ms": 100}) == "exec_command:cmd=rg foo"
    assert tool_reference("apply_patch", "*** Begin Patch") == "apply_patch:input=*** Begin Patch"
    long = tool_reference("apply_patch", "x" * 500)
    assert long is not None and long.startswith("apply_patch:input=#") and len(long) == len("apply_patch:input=#") + 16
    assert tool_reference("get_time", "{}") == "get_time:"
    assert tool_reference("", {"a": 1}) is None
    assert normalise_path("/abs/./b/../c") == "/abs/c"


@requires_corpus
def test_real_codex_rollout_texts():
    """The real Codex rollout's AGENTS.md, environment and skills messages classify as such."""
    path = CORPUS / "codex" / "codemie" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
    found = set()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            payload = record.get("payload") or {}
            if record.get("type") != "response_item" or payload.get("type") != "message":
                continue
            for block in payload.get("content") or []:
                text = block.get("text") or ""
                for seg in classify_text(text, payload.get("role", "user")):
                    found.add(seg.part)
    assert {"rules/AGENTS.md", "environment", "skills/index"} <= found


@requires_corpus
def test_real_claude_read_results_lose_their_malware_reminder():
    """In real Claude Code sessions, Read results carry a reminder that classifies as environment."""
    path = CORPUS / "claude" / "codemie" / "session-624a4a58.jsonl"
    split = 0
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if "Whenever you read a file" not in line:
                continue
            record = json.loads(line)
            for block in (record.get("message") or {}).get("content") or []:
                content = block.get("content") if isinstance(block, dict) else None
                if isinstance(content, str) and "<system-reminder>" in content:
                    segments = classify_text(content, "tool")
                    assert segments[-1].part == "environment"
                    split += 1
    assert split > 0
