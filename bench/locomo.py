#!/usr/bin/env python3
"""LoCoMo (snap-research/locomo) through bench/quality: convert and score.

    bench/locomo.py convert CONV.json OUT.json
    bench/locomo.py score CONV.json CONTEXT.txt

`convert` writes one conversation in the SGD fixture's format
(tests/src/quality/sgd.rs): one dialogue per session, speaker A as the
user, speaker B as the assistant, each session's first turn opening with
its date ("[1:56 pm on 8 May, 2023] ..."), no slot annotations.

`score` reads the context of the last compaction as bench/quality dumps it
(QUALITY_DUMP) and prints one JSON line: of the questions with an answer
(the adversarial ones, which have none, left out), the share whose answer
words all stand in the context (lower-cased, a few function words left
out), and all on one line; the same for the sliding window (the newest
messages that fit in the context's tokens, at 3 characters a token) and
for the full history.
"""
import json
import re
import sys

FUNCTION_WORDS = set(
    "a an the of in on at to and or is was for with her his their she he it by from as that this".split()
)


def turns(conv):
    """Every turn as (speaker is A, text), each session's first dated."""
    out = []
    i = 1
    while f"session_{i}" in conv:
        for j, t in enumerate(conv[f"session_{i}"]):
            text = t["text"]
            if j == 0:
                text = f"[{conv[f'session_{i}_date_time']}] " + text
            out.append((t["speaker"] == conv["speaker_a"], text))
        i += 1
    return out


def convert(src, dst):
    conv = json.load(open(src))
    dialogues, at = [], 0
    i = 1
    every = turns(conv)
    while f"session_{i}" in conv:
        n = len(conv[f"session_{i}"])
        dialogues.append({
            "id": f"session_{i}",
            "file": src,
            "services": [],
            "turns": [
                {"speaker": "USER" if a else "SYSTEM", "utterance": text, "slots": []}
                for a, text in every[at:at + n]
            ],
        })
        at += n
        i += 1
    json.dump({
        "source": "https://github.com/snap-research/locomo (data/locomo10.zip)",
        "commit": "e76cdff" + "0" * 33,
        "licence": "none stated: not kept in this repository",
        "split": f"conversation {src.rsplit('/', 1)[-1].split('.')[0]}",
        "dialogues": dialogues,
    }, open(dst, "w"))


def words(text):
    return [w for w in re.findall(r"\w+", text.lower()) if w not in FUNCTION_WORDS]


def score(src, context_path):
    conv = json.load(open(src))
    context = open(context_path).read()
    messages = [text for _, text in turns(conv)]
    tokens = len(context) / 3
    window, used = [], 0.0
    for m in reversed(messages):
        if used + len(m) / 3 > tokens:
            break
        window.append(m)
        used += len(m) / 3
    qa = [q for q in conv["qa"] if q.get("category") != 5 and "answer" in q]

    def share(text, one_line):
        units = [set(words(line)) for line in text.split("\n")] if one_line else [set(words(text))]
        kept = 0
        for q in qa:
            want = words(str(q["answer"]))
            kept += bool(want) and any(all(w in u for w in want) for u in units)
        return round(100.0 * kept / max(len(qa), 1), 1)

    full, win = "\n".join(messages), "\n".join(reversed(window))
    print(json.dumps({
        "answers": len(qa),
        "context_tokens": round(tokens),
        "ours": share(context, False), "ours_line": share(context, True),
        "window": share(win, False), "window_line": share(win, True),
        "full": share(full, False), "full_line": share(full, True),
    }))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "convert":
        convert(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
