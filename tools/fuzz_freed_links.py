"""Differential fuzz of the Claude Code reader's freed links (issue 14): the file reader against one fed records.

    python tools/fuzz_freed_links.py FIRST LAST [-q] [--reuse] [--small]

For each seed in ``range(FIRST, LAST)`` a generated session (rewinds, compactions,
microcompactions, two sessionIds, copies of earlier call lines, sidechains, progress
and attachment links, a BOM, CRLF ends, blank lines) is written to /tmp/ctxscope-fuzz
and read three ways: a :class:`TranscriptFile` (links a cut removes let go to the
file and read back), the same file followed as it is written in pieces and polled
after each, and a reader fed every record (it keeps every link). Their calls must be
equal field for field; a seed that differs is printed and its file kept.
``--reuse``: tool-use ids written again with other tools; ``--small``: call keys
retired past 6 instead of 4,096 (the Bloom filter and the read back on every seed).
"""
import json
import os
import random
import sys

from ctxscope.transcripts import TranscriptFile, make_reader
from ctxscope.transcripts import claude_code

SMALL = "--small" in sys.argv
REUSE = "--reuse" in sys.argv
SCRATCH = "/tmp/ctxscope-fuzz"
if SMALL:
    claude_code._RECENT_CALLS = 3  # noqa: SLF001 - the retiring made to happen on small files


def calls_of(calls):
    out = []
    for c in calls:
        out.append((c.session_id, c.parent_session_id, c.index, c.reset, c.line, c.model, c.compaction,
                    [(i.id, i.category, i.part, i.chars, i.digest, i.reference, i.label, i.source_call_id,
                      i.source_kind) for i in c.items],
                    [(i.id, i.digest, i.label) for i in c.added]))
    return out


def fed(path):
    reader = make_reader("claude-code", os.path.basename(path))
    out = []
    with open(path, "rb") as handle:
        for line, raw in enumerate(handle, 1):
            if line == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if raw.strip():
                out.extend(reader.feed(json.loads(raw), line))
    return calls_of(out), reader


def gen(rng):
    recs = []
    n = [0]
    sessions = ["s"] + (["t"] if rng.random() < 0.3 else [])
    tip = {s: None for s in sessions}
    links = {s: [] for s in sessions}
    calls_written = []  # (record) assistant call lines, for copies
    tool_ids = []
    side = rng.random() < 0.3

    def new(kind="u"):
        n[0] += 1
        return f"{kind}{n[0]}"

    for _ in range(rng.randint(5, 60)):
        s = rng.choice(sessions)
        r = rng.random()
        parent = tip[s]
        if links[s] and rng.random() < 0.15:
            parent = rng.choice(links[s])  # rewind
        extra = {}
        if side and rng.random() < 0.2:
            extra = {"isSidechain": True, "agentId": rng.choice(["A", "B"])}
        if r < 0.08 and links[s]:
            u = new("b")
            recs.append({"type": "system", "subtype": "compact_boundary", "uuid": u, "parentUuid": None,
                         "logicalParentUuid": tip[s] or "x", "sessionId": s,
                         "compactMetadata": {"trigger": "auto", "preTokens": 5}, **extra})
            tip[s] = u
            links[s].append(u)
            u2 = new()
            recs.append({"type": "user", "uuid": u2, "parentUuid": u, "sessionId": s, "isCompactSummary": True,
                         "message": {"role": "user", "content": "summary " * rng.randint(1, 5)}, **extra})
            tip[s] = u2
            links[s].append(u2)
            continue
        if r < 0.12 and tool_ids:
            u = new("m")
            ids = rng.sample(tool_ids, min(len(tool_ids), rng.randint(1, 3)))
            recs.append({"type": "system", "subtype": "microcompact_boundary", "uuid": u, "parentUuid": parent,
                         "sessionId": s, "microcompactMetadata": {"compactedToolIds": ids}, **extra})
        elif r < 0.2 and calls_written:
            # a copy of an earlier call line (resume), maybe in another session
            rec = dict(rng.choice(calls_written))
            if rng.random() < 0.5:
                rec["sessionId"] = rng.choice(sessions)
            recs.append(rec)
            continue
        elif r < 0.25:
            u = new("p")
            recs.append({"type": "progress", "uuid": u, "parentUuid": parent, "sessionId": s, **extra})
        elif r < 0.3:
            u = new("t")
            recs.append({"type": "attachment", "uuid": u, "parentUuid": parent, "sessionId": s,
                         "attachment": {"type": "nested_memory", "content": "mem " * rng.randint(1, 4)}, **extra})
        elif r < 0.55:
            u = new()
            if tool_ids and rng.random() < 0.6:
                tid = rng.choice(tool_ids) if rng.random() < 0.3 else tool_ids[-1]
                content = [{"type": "tool_result", "tool_use_id": tid, "content": "res " * rng.randint(1, 9)}]
            else:
                content = "prompt " * rng.randint(1, 9)
            recs.append({"type": "user", "uuid": u, "parentUuid": parent, "sessionId": s,
                         "message": {"role": "user", "content": content}, **extra})
        else:
            u = new("a")
            k = rng.randint(0, 10 ** 6) if rng.random() < 0.9 else rng.randint(0, 3)
            blocks = []
            if rng.random() < 0.5:
                blocks.append({"type": "text", "text": "text " * rng.randint(1, 5)})
            if rng.random() < 0.6 or not blocks:
                tid = f"toolu_{n[0]}" if not REUSE or rng.random() < 0.9 or not tool_ids else rng.choice(tool_ids)
                tool_ids.append(tid)
                blocks.append({"type": "tool_use", "id": tid, "name": rng.choice(["Read", "Bash"]),
                               "input": {"file_path": f"f{rng.randint(0, 5)}"}})
            rec = {"type": "assistant", "uuid": u, "parentUuid": parent, "sessionId": s, "requestId": f"r{k}",
                   "message": {"id": f"msg{k}", "role": "assistant", "model": "m1", "content": blocks,
                               "usage": {"input_tokens": 3}}, **extra}
            recs.append(rec)
            calls_written.append(rec)
            if rng.random() < 0.4:
                # a second line of the same response
                u2 = new("a")
                rec2 = dict(rec, uuid=u2, parentUuid=u,
                            message=dict(rec["message"], content=[{"type": "text", "text": "more"}]))
                recs.append(rec2)
                links[s].append(u)
                tip[s] = u = u2
        tip[s] = u
        links[s].append(u)
    return recs


def write(path, recs, rng):
    parts = []
    for r in recs:
        line = json.dumps(r)
        eol = "\r\n" if rng.random() < 0.1 else "\n"
        parts.append(line + eol)
        if rng.random() < 0.05:
            parts.append("\n")
    data = "".join(parts).encode()
    if rng.random() < 0.2:
        data = b"\xef\xbb\xbf" + data
    with open(path, "wb") as f:
        f.write(data)
    return data


def written_in_pieces(path, data, rng, largest):
    """``data`` appended to ``path`` in pieces of 1 to ``largest`` bytes: a pause (a yield) after each."""
    pos = 0
    while pos < len(data):
        step = rng.randint(1, largest)
        with open(path, "ab") as f:
            f.write(data[pos:pos + step])
        pos += step
        yield


def main():
    seeds = range(int(sys.argv[1]), int(sys.argv[2]))
    quiet = "-q" in sys.argv
    bad = 0
    os.makedirs(SCRATCH, exist_ok=True)
    for seed in seeds:
        rng = random.Random(seed)
        recs = gen(rng)
        path = os.path.join(SCRATCH, f"{seed}.jsonl")
        data = write(path, recs, rng)
        want, reader = fed(path)
        got = calls_of(TranscriptFile(path).calls())
        # incremental: written in pieces, polled between
        inc_path = os.path.join(SCRATCH, f"{seed}.inc.jsonl")
        open(inc_path, "wb").close()
        tf = TranscriptFile(inc_path, documents=False)
        inc = []
        for _ in written_in_pieces(inc_path, data, rng, 400):
            inc.extend(tf.poll())
        inc.extend(tf.poll(final=True))
        inc = calls_of(inc)
        if got != want or inc != want:
            bad += 1
            print("DIFF seed", seed, "file" if got != want else "", "inc" if inc != want else "")
            for a, b in ([] if quiet else zip(want, got if got != want else inc)):
                if a != b:
                    print(" want", a)
                    print(" got ", b)
                    break
            if len(want) != len(got):
                print(" lens", len(want), len(got), len(inc))
        os.remove(inc_path)
        if got == want and inc == want:
            os.remove(path)
    print("bad", bad, "of", len(seeds))


if __name__ == "__main__":
    main()
