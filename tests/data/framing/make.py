#!/usr/bin/env python3
"""The framing sample: user turns of the Schema-Guided Dialogue dataset,
labelled by the dataset's own dialogue acts (see README.md).

    python3 tests/data/framing/make.py <git dir or work tree of
        google-research-datasets/dstc8-schema-guided-dialogue>

Reads the same dialogues as tests/data/sgd (their ids), so the tuning and
held-out splits are the same dialogues there and here.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SGD = os.path.join(HERE, "..", "sgd")

# A turn states a decision or a constraint when the user gives a value the
# task must meet (INFORM of a slot: "Find events in Portland, OR.", "On the
# 7th.", "I need a cab for two people.").
# Acts of a turn that states none: thanks, goodbye, a question, a request
# for other options, a bare yes or no, a task asked for with no value.
UNMARKED = {"THANK_YOU", "GOODBYE", "REQUEST", "REQUEST_ALTS", "AFFIRM", "NEGATE", "INFORM_INTENT"}
# Anything else is left out of the sample: picking an offer with no value
# of it (SELECT: "That sounds good to me."), accepting or declining an
# offered transaction (AFFIRM_INTENT, NEGATE_INTENT). The acts say a
# choice was made, not whether the user's words carry what was chosen.


def show(repo, path):
    return subprocess.run(
        ["git", f"--git-dir={repo}" if os.path.isdir(os.path.join(repo, "objects")) else f"--git-dir={os.path.join(repo, '.git')}",
         "show", f"HEAD:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout


def label(turn):
    acts = {a["act"] for f in turn["frames"] for a in f["actions"]}
    informs = any(
        a["act"] == "INFORM" and a.get("slot") != "intent"
        for f in turn["frames"] for a in f["actions"]
    )
    if informs:
        return True, sorted(acts)
    if acts and acts <= UNMARKED:
        return False, sorted(acts)
    return None, sorted(acts)


def main():
    repo = sys.argv[1]
    for split in ("train", "test"):
        fixture = json.load(open(os.path.join(SGD, f"{split}.json")))
        by_file = {}
        for d in fixture["dialogues"]:
            by_file.setdefault(d["file"], set()).add(d["id"])
        turns = []
        for path in sorted(by_file):
            for d in json.loads(show(repo, path)):
                if d["dialogue_id"] not in by_file[path]:
                    continue
                for t in d["turns"]:
                    if t["speaker"] != "USER":
                        continue
                    marked, acts = label(t)
                    if marked is None:
                        continue
                    turns.append({"dialogue": d["dialogue_id"], "utterance": t["utterance"],
                                  "acts": acts, "marked": marked})
        turns.sort(key=lambda t: t["dialogue"])
        out = {
            "source": "https://github.com/google-research-datasets/dstc8-schema-guided-dialogue",
            "commit": fixture["commit"],
            "licence": "CC BY-SA 4.0 (adapted: user turns with their acts only)",
            "split": split,
            "turns": turns,
        }
        with open(os.path.join(HERE, f"{split}.json"), "w") as f:
            f.write("{\n")
            for k in ("source", "commit", "licence", "split"):
                f.write(f"{json.dumps(k)}: {json.dumps(out[k])},\n")
            f.write('"turns": [\n')
            f.write(",\n".join(json.dumps(t, ensure_ascii=False) for t in turns))
            f.write("\n]}\n")
        pos = sum(t["marked"] for t in turns)
        print(f"{split}: {len(turns)} user turns, {pos} marked", file=sys.stderr)


if __name__ == "__main__":
    main()
