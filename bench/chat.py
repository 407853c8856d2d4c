"""Answer latency over the real websocket, per strategy, and concurrent conversations: prints
figures, writes bench/results/chat.json and bench/results/chat.png.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/chat.py [--repeat 3] [--concurrent 20]

Uses the configured database (run `manage.py migrate` first), Redis and chat model (the
local one by default), starts its own daphne, and indexes three small files (a bilingual
policy PDF and two product sheets) into a collection of its own, deleted at the end.
For each strategy (direct, rewrite, multi-step) it asks --repeat questions and measures the
time from sending `ask` to the first event, to the first answer token, and to `done`.
Then --concurrent users each open a socket and ask at once: every conversation must end in
`done`. Target from issue 7: first event <= 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
OUT = ROOT / "bench" / "results"
LOG = Path(tempfile.gettempdir()) / "portal-bench-chat-daphne.log"

# (strategy, [questions asked in one conversation]; the last one is measured)
CASES = [
    ("direct", ["未休完的年假可以累积到下一年吗？"]),
    ("direct", ["How many days of paid annual leave do employees get?"]),
    ("rewrite", ["年假有几天？", "它可以累积吗？"]),
    ("multi_step", ["比较 Falcon 路由器和 Heron 交换机的保修期"]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="questions per case")
    parser.add_argument("--concurrent", type=int, default=20, help="conversations at once")
    args = parser.parse_args()

    import django

    django.setup()
    from bench.common import web
    from knowledge import actions

    users, keys, target = prepare(args.concurrent)
    try:
        with web(LOG) as port:
            results = asyncio.run(measure(port, keys, target.pk, args.repeat, args.concurrent))
    finally:
        team = target.owner_team
        actions.do_delete_collection(target)
        team.delete()
        for user in users:
            user.delete()
    report(results)


def prepare(count: int) -> tuple[list[Any], list[str], Any]:
    from django.contrib.auth import get_user_model

    from knowledge import actions
    from knowledge.models import Role
    from tests.assistant.chat_files import files, ingest_files

    model = get_user_model()
    stamp = f"{time.time():.0f}"
    users = [
        model.objects.create(username=f"bench-chat-{stamp}-{n}", email=f"b{n}-{stamp}@localhost") for n in range(count)
    ]
    team = actions.do_create_team(users[0], f"bench chat {stamp}")
    for user in users[1:]:
        actions.do_add_member(team, user, Role.VIEWER)
    target = actions.do_create_collection(users[0], f"bench chat {stamp}", team=team)
    ingest_files(target, files())
    keys = [actions.do_create_token(user, "bench")[1] for user in users]
    return users, keys, target


async def conversation(port: int, key: str, collection: int, questions: list[str]) -> dict[str, Any]:
    """Ask the questions in one conversation; timings of the last one."""
    import websockets

    from bench.common import ask

    url = f"ws://127.0.0.1:{port}/ws/chat/"
    async with websockets.connect(url, additional_headers={"Authorization": f"Token {key}"}) as ws:
        conversation_id = None
        for question in questions:
            asked = await ask(ws, question, [collection], conversation_id)
            conversation_id = asked["events"][0].get("conversation", conversation_id)
        last = asked["events"][-1]
        strategies = [event["strategy"] for event in asked["events"] if event["type"] == "strategy"]
        return {
            "ok": asked["ok"],
            "error": last.get("message", ""),
            "strategy": strategies[0] if strategies else "",
            "first_event_ms": asked["first_event_ms"],
            "first_token_ms": asked["first_token_ms"] or asked["total_ms"],
            "total_ms": asked["total_ms"],
        }


async def measure(port: int, keys: list[str], collection: int, repeat: int, concurrent: int) -> dict[str, Any]:
    by_case: list[dict[str, Any]] = []
    for expected, questions in CASES:
        for round_ in range(repeat):
            result = await conversation(port, keys[round_ % len(keys)], collection, questions)
            result.update(case=expected, question=questions[-1])
            print(
                f"{expected:10} got {result['strategy']:10} first event {result['first_event_ms']:7.1f} ms, "
                f"first token {result['first_token_ms'] / 1000:6.1f} s, total {result['total_ms'] / 1000:6.1f} s"
                + ("" if result["ok"] else f"  ERROR {result['error']}"),
                flush=True,
            )
            by_case.append(result)
    print(f"\n{concurrent} conversations at once …", flush=True)
    started = time.perf_counter()
    together = await asyncio.gather(
        *(conversation(port, keys[n], collection, [CASES[n % 2][1][-1]]) for n in range(concurrent)),
        return_exceptions=True,
    )
    wall = time.perf_counter() - started
    failures = [str(item) if isinstance(item, BaseException) else item["error"] for item in together
                if isinstance(item, BaseException) or not item["ok"]]  # fmt: skip
    finished = [item for item in together if isinstance(item, dict)]
    return {"cases": by_case, "concurrent": {"count": concurrent, "wall_s": wall, "failures": failures,
            "results": finished}}  # fmt: skip


def report(results: dict[str, Any]) -> None:
    from django.conf import settings

    from bench.common import summary

    figures: dict[str, Any] = {"model": settings.MODEL_ROLES["chat"].model, "strategies": {}}
    print(f"\nchat model: {figures['model']}")
    for strategy in dict.fromkeys(case for case, _ in CASES):
        rows = [row for row in results["cases"] if row["case"] == strategy]
        if not rows:  # --repeat 0: only the concurrent run
            continue
        figures["strategies"][strategy] = {
            key: summary([row[key] for row in rows]) for key in ("first_event_ms", "first_token_ms", "total_ms")
        } | {"routed_as_expected": sum(row["strategy"] == strategy for row in rows), "asked": len(rows)}
        line = figures["strategies"][strategy]
        first, token, total = line["first_event_ms"], line["first_token_ms"], line["total_ms"]
        print(
            f"{strategy:10} first event median {first['median']:6.1f} ms (max {first['max']:.1f}); "
            f"first token median {token['median'] / 1000:5.1f} s; total median {total['median'] / 1000:5.1f} s; "
            f"routed as labelled {line['routed_as_expected']}/{line['asked']}"
        )
    together = results["concurrent"]
    firsts = [row["first_event_ms"] for row in together["results"]]
    figures["concurrent"] = {
        "count": together["count"],
        "failures": together["failures"],
        "wall_s": together["wall_s"],
        "first_event_ms": summary(firsts) if firsts else {},
        "total_s": summary([row["total_ms"] / 1000 for row in together["results"]]) if firsts else {},
    }
    print(
        f"{together['count']} at once: {len(together['failures'])} failed, all done in {together['wall_s']:.1f} s, "
        f"first event median {figures['concurrent']['first_event_ms'].get('median', 0):.1f} ms "
        f"(max {figures['concurrent']['first_event_ms'].get('max', 0):.1f} ms)"
    )
    all_firsts = [row["first_event_ms"] for row in results["cases"]] + firsts
    print(f"first event <= 200 ms: {'met' if max(all_firsts) <= 200 else 'NOT met'} (max {max(all_firsts):.1f} ms)")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "chat.json").write_text(json.dumps({"figures": figures, "raw": results}, indent=2, ensure_ascii=False))
    plot(figures)


def plot(figures: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    strategies = list(figures["strategies"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(strategies, [figures["strategies"][s]["first_event_ms"]["median"] for s in strategies], color="#4c72b0")
    left.axhline(200, color="red", linestyle="--", label="target 200 ms")
    left.set_ylabel("ms")
    left.set_title("first event (median)")
    left.legend()
    width = 0.4
    xs = range(len(strategies))
    for offset, key, label in ((-width / 2, "first_token_ms", "first token"), (width / 2, "total_ms", "total")):
        heights = [figures["strategies"][s][key]["median"] / 1000 for s in strategies]
        right.bar([x + offset for x in xs], heights, width, label=label)
    right.set_xticks(list(xs), strategies)
    right.set_ylabel("s")
    right.set_title("answer time (median)")
    fig.suptitle(f"chat model: {figures['model']}")
    right.legend()
    fig.tight_layout()
    fig.savefig(OUT / "chat.png", dpi=110)


if __name__ == "__main__":
    main()
