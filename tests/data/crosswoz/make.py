#!/usr/bin/env python3
"""Derives the quality benchmark's CrossWOZ fixtures (tune.json,
held-out.json) from a git checkout or bare mirror of
https://github.com/thu-coai/CrossWOZ, in the format of the SGD fixtures
(tests/data/sgd), so the same loader makes sessions of them.

    python3 tests/data/crosswoz/make.py <path to the repository's git dir or work tree>

Selection (deterministic): tune.json from data/crosswoz/val.json.zip (the
split the engine may be tuned on), held-out.json from
data/crosswoz/test.json.zip (never read while tuning): dialogues in order
of their numeric id until the selection has at least MIN_TURNS turns (whole
dialogues only).

Kept per dialogue: its id and domains (as English service names); per turn:
the speaker (usr -> USER, sys -> SYSTEM), the utterance, and every
Inform / Recommend / Select act with a value as {service, slot, value},
the slot name given in English (SLOTS, so the benchmark can class it; an
unlisted slot keeps its Chinese name). Everything else (goals, states,
Request and General acts) is removed. The loader scores only values that
are in their utterance.

Python 3.11 standard library only.
"""

import io
import json
import os
import subprocess
import sys
import zipfile

MIN_TURNS = 1200
SPLITS = {"tune": "val", "held-out": "test"}
SERVICES = {"餐馆": "restaurant", "景点": "attraction", "酒店": "hotel", "地铁": "metro", "出租": "taxi"}
SLOTS = {
    "名称": "name",
    "地址": "address",
    "电话": "phone",
    "人均消费": "price",
    "价格": "price",
    "门票": "price",
    "评分": "rating",
    "营业时间": "open_time",
    "游玩时间": "visit_time",
    "周边景点": "nearby_attraction_name",
    "周边餐馆": "nearby_restaurant_name",
    "周边酒店": "nearby_hotel_name",
    "推荐菜": "dish",
    "酒店类型": "hotel_type",
    "出发地": "from",
    "目的地": "to",
    "出发地附近地铁站": "from_station",
    "目的地附近地铁站": "to_station",
    "车型": "car_type",
    "车牌": "plate",
    "源领域": "source_domain",
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
    for name, split in SPLITS.items():
        raw = git(gitdir, "show", f"HEAD:data/crosswoz/{split}.json.zip")
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            data = json.loads(z.read(f"{split}.json"))
        chosen, turns = [], 0
        for did in sorted(data, key=int):
            if turns >= MIN_TURNS:
                break
            chosen.append(slim(did, data[did], f"data/crosswoz/{split}.json.zip"))
            turns += len(data[did]["messages"])
        out = os.path.join(here, f"{name}.json")
        with open(out, "w", encoding="utf-8") as f:
            f.write("{\n")
            f.write('"source": "https://github.com/thu-coai/CrossWOZ",\n')
            f.write(f'"commit": "{commit}",\n')
            f.write('"licence": "Apache-2.0 (adapted: fields removed, slot names translated)",\n')
            f.write(f'"split": "{split}",\n')
            f.write('"dialogues": [\n')
            f.write(
                ",\n".join(json.dumps(d, ensure_ascii=False, separators=(",", ":")) for d in chosen)
            )
            f.write("\n]\n}\n")
        print(f"{out}: {len(chosen)} dialogues, {turns} turns, {os.path.getsize(out)} bytes")


def slim(did, d, file):
    turns, services = [], []
    for m in d["messages"]:
        slots = []
        for intent, domain, slot, value in m["dialog_act"]:
            if intent not in ("Inform", "Recommend", "Select") or not value or value == "none":
                continue
            service = SERVICES.get(domain, domain)
            if service not in services:
                services.append(service)
            slots.append({"service": service, "slot": SLOTS.get(slot, slot), "value": value})
        speaker = "USER" if m["role"] == "usr" else "SYSTEM"
        turns.append({"speaker": speaker, "utterance": m["content"], "slots": slots})
    return {"id": did, "file": file, "services": services, "turns": turns}


if __name__ == "__main__":
    main()
