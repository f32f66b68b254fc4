#!/usr/bin/env python3
"""Derives the quality benchmark's SGD fixtures (train.json, test.json) from
a git checkout or bare mirror of
https://github.com/google-research-datasets/dstc8-schema-guided-dialogue.

    python3 tests/data/sgd/make.py <path to the repository's git dir or work tree>

Selection (deterministic): for each split (train = the tuning split, test =
the held-out one), the files FILES[split] (train/dialogues_001..036.json,
test/dialogues_001..011.json: each split's first files, all present in the
mirror this was made from), read round-robin: the first dialogue of each
file in file order, then the second of each, and so on, until the selection
has at least MIN_TURNS turns (whole dialogues only). The fixture keeps them
in that order; the benchmark concatenates them into one workstream.

Kept per dialogue: its id and services; per turn: the speaker, the
utterance, and every slot span of every frame as {service, slot, value},
the value being the utterance's text at [start, exclusive_end). Everything
else (actions, states, service calls and results) is removed.

Python 3.11 standard library only.
"""

import json
import os
import subprocess
import sys

MIN_TURNS = 1200
FILES = {
    "train": [f"dialogues_{i:03}.json" for i in range(1, 37)],
    "test": [f"dialogues_{i:03}.json" for i in range(1, 12)],
}


def git(gitdir, *args):
    return subprocess.run(
        ["git", "--git-dir", gitdir, *args], check=True, capture_output=True
    ).stdout


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    gitdir = sys.argv[1]
    if os.path.isdir(os.path.join(gitdir, ".git")):
        gitdir = os.path.join(gitdir, ".git")
    commit = git(gitdir, "rev-parse", "HEAD").decode().strip()
    here = os.path.dirname(os.path.abspath(__file__))
    for split, names in FILES.items():
        files = [json.loads(git(gitdir, "show", f"HEAD:{split}/{n}")) for n in names]
        chosen, turns, k = [], 0, 0
        while turns < MIN_TURNS:
            for name, dialogues in zip(names, files):
                if turns >= MIN_TURNS:
                    break
                if k < len(dialogues):
                    chosen.append(slim(dialogues[k], f"{split}/{name}"))
                    turns += len(dialogues[k]["turns"])
            k += 1
        out = os.path.join(here, f"{split}.json")
        with open(out, "w", encoding="utf-8") as f:
            f.write("{\n")
            f.write(f'"source": "https://github.com/google-research-datasets/dstc8-schema-guided-dialogue",\n')
            f.write(f'"commit": "{commit}",\n')
            f.write('"licence": "CC BY-SA 4.0 (adapted: fields removed)",\n')
            f.write(f'"split": "{split}",\n')
            f.write('"dialogues": [\n')
            f.write(
                ",\n".join(json.dumps(d, ensure_ascii=False, separators=(",", ":")) for d in chosen)
            )
            f.write("\n]\n}\n")
        print(f"{out}: {len(chosen)} dialogues, {turns} turns, {os.path.getsize(out)} bytes")


def slim(d, file):
    turns = []
    for t in d["turns"]:
        u = t["utterance"]
        slots = [
            {"service": fr["service"], "slot": s["slot"], "value": u[s["start"] : s["exclusive_end"]]}
            for fr in t["frames"]
            for s in fr["slots"]
        ]
        turns.append({"speaker": t["speaker"], "utterance": u, "slots": slots})
    return {"id": d["dialogue_id"], "file": file, "services": d["services"], "turns": turns}


if __name__ == "__main__":
    main()
