#!/usr/bin/env python3
"""Derives the quality benchmark's Claude Code fixtures (tune.json,
held-out.json) from real Claude Code session files kept as test fixtures by
https://github.com/marot/spotter (MIT), test/fixtures/transcripts/.

    python3 tests/data/claude-code/make.py <path to spotter's git dir or work tree>

Sessions (fixed): TUNE is the one the engine may be tuned on, HELD_OUT is
never read while tuning.

Kept: the main thread's user and assistant events (not sidechains), in
order. Assistant events of one API message (same message.id, consecutive)
become one assistant message of text and tool calls (name, input);
thinking blocks are dropped. Each tool_result becomes a tool message (its
text; images as "[image]"). User text is kept as user messages. Dropped:
progress, system, file-history-snapshot and queue-operation events, and
every field but these.

Facts, by rules fixed before any scoring (FACT RULES below), written into
the fixture as {value, kind, rule}; the benchmark locates each by
measurement and drops one it cannot find as a whole token.

Python 3.11 standard library only.
"""

import json
import os
import re
import subprocess
import sys

DIR = "test/fixtures/transcripts"
TUNE = "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
HELD_OUT = "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"

# FACT RULES
# 1. "user": values the user typed: in user text that is the user's own
#    (not a compaction summary, not isMeta, not a <task-notification> or
#    other <tag> wrapper the harness writes; <system-reminder> sections
#    cut), every URL, path, module name, snake_case or kebab-case
#    identifier, number of 3+ digits, and `backticked` or "double-quoted"
#    string (2-80 characters).
# 2. "repeated": values of tool output the assistant later repeated in its
#    own text: a URL, path, module name, snake_case identifier, kebab-case
#    identifier with a digit, or number of 3+ digits in a tool result that
#    occurs again (as a whole token) in a later assistant text; and a
#    `backticked` span (4-80 characters, no whitespace, not a plain word:
#    some non-letter or an inner capital) of assistant text that occurs
#    verbatim in an earlier tool result. At least 4 characters; not
#    already a rule-1 value. A kebab-case identifier of tool output needs a
#    digit and is not a number-word ("10-line"); a word/word token is a
#    path only if it starts at / ~ or ., has two slashes or a trailing
#    one, or names a file ("expand/collapse" is prose).
# Values equal but for case are one fact.
PATTERNS = {
    "url": r"https?://[^\s)>\]\"'`]+",
    "path": r"(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]+|\b[\w-]+\.(?:ex|exs|heex|eex|rs|js|mjs|ts|tsx|json|jsonl|md|py|sh|ya?ml|toml|sql|css|html|txt|lock)\b",
    "module": r"\b[A-Z]\w*(?:\.[A-Z]\w*)+\b",
    "snake": r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+[?!]?",
    "kebab": r"\b[a-z0-9]+(?:-[a-z0-9]+)+\b",
    "number": r"\b\d{3,}(?:\.\d+)?\b",
}
KIND = {"url": "url", "path": "path", "module": "identifier", "snake": "identifier",
        "kebab": "identifier", "number": "quantity", "quoted": "identifier"}
TRAIL = ".,;:)]}>'\""


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True).stdout


def tokens(text, user):
    out = []
    for kind in PATTERNS:
        for m in re.finditer(PATTERNS[kind], text):
            v = m.group(0).rstrip(TRAIL)
            if kind == "kebab" and not user and not (re.search(r"\d", v) and not re.fullmatch(r"\d+-[a-z]+", v)):
                continue
            if kind == "path" and "/" in v and not is_path(v):
                continue
            out.append((v, KIND[kind]))
    return out


def is_path(v):
    """word/word is prose ("expand/collapse"); a path starts at / ~ or .,
    has two slashes or ends with one, or names a file (an extension)."""
    return v[0] in "/~." or v.count("/") >= 2 or v.endswith("/") or "." in v.rsplit("/", 1)[-1]


def kind_of(q):
    """The kind of a quoted span: that of the pattern it is, else identifier."""
    for kind, pat in PATTERNS.items():
        if re.fullmatch(pat, q) and (kind != "path" or is_path(q)):
            return KIND[kind]
    return "identifier"


def code_like(q):
    """A backticked span that is a value, not a word: no whitespace, and
    some non-letter (_ . / : @ ( { % digits…) or an inner capital."""
    return not re.search(r"\s", q) and (re.search(r"[^A-Za-z]", q) or re.search(r"[a-z][A-Z]", q))


def whole(text, value):
    return re.search(r"(?<![\w./:@+-])" + re.escape(value) + r"(?![\w/@+-])", text) is not None


def user_own(e, text):
    if e.get("isCompactSummary") or e.get("isMeta") or text.lstrip().startswith("<"):
        return None
    return re.sub(r"<system-reminder>.*?</system-reminder>", "", text, flags=re.S)


def convert(lines):
    messages, last_id = [], None
    user_texts = []
    for line in lines:
        e = json.loads(line)
        if e.get("type") not in ("user", "assistant") or e.get("isSidechain"):
            continue
        m = e.get("message") or {}
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if e["type"] == "assistant":
            parts = []
            for b in content or []:
                if b.get("type") == "text" and b.get("text", "").strip():
                    parts.append({"text": b["text"]})
                elif b.get("type") == "tool_use":
                    parts.append({"call": b["id"], "tool": b["name"], "input": b.get("input", {})})
            if not parts:
                continue
            if messages and messages[-1]["role"] == "assistant" and m.get("id") and m.get("id") == last_id:
                messages[-1]["parts"].extend(parts)
            else:
                messages.append({"role": "assistant", "parts": parts})
            last_id = m.get("id")
            continue
        last_id = None
        for b in content or []:
            if b.get("type") == "tool_result":
                c = b.get("content")
                if isinstance(c, list):
                    c = "\n".join(x.get("text", "") if x.get("type") == "text" else "[image]" for x in c)
                messages.append({"role": "tool", "parts": [{"result": b["tool_use_id"], "output": c or "", "is_error": bool(b.get("is_error"))}]})
            elif b.get("type") == "text" and b.get("text", "").strip():
                messages.append({"role": "user", "parts": [{"text": b["text"]}]})
                own = user_own(e, b["text"])
                if own:
                    user_texts.append(own)
    # Tool names on results.
    names = {p["call"]: p["tool"] for msg in messages for p in msg["parts"] if "call" in p}
    for msg in messages:
        for p in msg["parts"]:
            if "result" in p:
                p["tool"] = names.get(p["result"], "unknown")
    return messages, user_texts


def facts_of(messages, user_texts):
    facts, seen = [], set()

    def add(value, kind, rule):
        if value.lower() not in seen and len(value) >= 2:
            seen.add(value.lower())
            facts.append({"value": value, "kind": kind, "rule": rule})

    for text in user_texts:
        for v, k in tokens(text, True):
            add(v, k, "user")
        for q in re.findall(r"`([^`\n]{2,80})`", text) + re.findall(r'"([^"\n]{2,80})"', text):
            add(q.strip(), kind_of(q.strip()), "user")
    # Rule 2.
    outputs = []  # the tool results so far
    for i, msg in enumerate(messages):
        for p in msg["parts"]:
            if "result" in p:
                outputs.append(p["output"])
            elif "text" in p and msg["role"] == "assistant":
                text = p["text"]
                for q in re.findall(r"`([^`\n]{4,80})`", text):
                    if code_like(q) and any(q in o for o in outputs):
                        add(q, kind_of(q), "repeated")
    # Tool-output tokens repeated later in assistant text.
    later_text = []
    for i, msg in enumerate(messages):
        if msg["role"] == "assistant":
            later_text.append((i, "\n".join(p["text"] for p in msg["parts"] if "text" in p)))
    for i, msg in enumerate(messages):
        for p in msg["parts"]:
            if "result" not in p:
                continue
            for v, k in tokens(p["output"], False):
                if len(v) < 4 or v.lower() in seen:
                    continue
                if any(j > i and whole(t, v) for j, t in later_text):
                    add(v, k, "repeated")
    return facts


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    gitdir = sys.argv[1]
    if os.path.isdir(os.path.join(gitdir, ".git")):
        gitdir = os.path.join(gitdir, ".git")
    commit = git(gitdir, "rev-parse", "HEAD").decode().strip()
    here = os.path.dirname(os.path.abspath(__file__))
    for name, session in (("tune", TUNE), ("held-out", HELD_OUT)):
        path = f"{DIR}/{session}"
        lines = git(gitdir, "show", f"HEAD:{path}").decode().splitlines()
        messages, user_texts = convert(lines)
        facts = facts_of(messages, user_texts)
        out = os.path.join(here, f"{name}.json")
        with open(out, "w", encoding="utf-8") as f:
            head = {
                "source": "https://github.com/marot/spotter",
                "path": path,
                "commit": commit,
                "licence": "MIT (Copyright (c) 2026 marot); adapted: events and fields removed",
                "split": name,
            }
            f.write(json.dumps(head, ensure_ascii=False)[:-1] + ',\n"facts": [\n')
            f.write(",\n".join(json.dumps(x, ensure_ascii=False) for x in facts))
            f.write('\n],\n"messages": [\n')
            f.write(",\n".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in messages))
            f.write("\n]}\n")
        rules = {r: sum(1 for x in facts if x["rule"] == r) for r in ("user", "repeated")}
        print(f"{out}: {len(messages)} messages, {len(facts)} facts {rules}, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
