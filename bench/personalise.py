"""Answers that adapt to a user: a simulated user with a stated preference judges a few answers, then is asked on.

    .venv/bin/python -m bench.personalise --work /tmp/loc-base --feedback 5 --json bench/results/personalise.json

On each LoCoMo conversation of the store ``adamem bench locomo --work`` builds (built here when missing),
three simulated users judge the top 10 items of the first ``--feedback`` questions (categories 1–4 with
evidence), as a person who stated a preference would:

- **summaries**: a record or trait holding evidence helped; every message did not (they want the conclusion);
- **examples**: a message holding evidence helped; every record and trait did not (they want what was said);
- **neutral**: whatever holds evidence helped, whatever does not did not (no preference).

Their judgements are folded into an answer style by the fold's own code (``AnswerStyle.with_items``,
as ``projections.folds.style`` folds ``AnswerFeedback`` events), and every *later* question of the
conversation — none of them judged — is asked without and with that style (``Retriever.ranking_style``
decides, as for a live owner, whether it ranks at all). Per conversation and pooled:

- **preferred R@10**: the share of a question's evidence turns held by items of the class the user
  prefers among the top 10 (for the neutral user, any item: plain R@10);
- **R@10**: the plain evidence recall, to show what adapting costs the answer as a whole;
- the style learned (its preference in (−1, 1)), and the ranking CPU per question without and with it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adamem.events import JudgedItem
from adamem.projections.folds.rows import MessageRow
from adamem.projections.folds.style import AnswerStyle, is_summary
from adamem.retrieval import Retriever
from adamem.retrieval.answer import Answer, Item
from adamem.retrieval.snapshot import View
from bench.locomo_quick import CATEGORIES, built_store, evidence_ids, parse_set

USERS = ("summaries", "examples", "neutral")


class Styled(Retriever):
    """A retriever whose owners' answer styles are given (``styles``), not read from their rows."""

    styles: dict[str, AnswerStyle]

    def _style(self, view: View) -> AnswerStyle | None:
        style = self.styles.get(view.snapshot.owner_id)
        return None if style is None or not view.live else self.ranking_style(style)


def _summary(item: Item) -> bool:
    return is_summary(str(item.layer), item.kind)


def _holds(item: Item, gold: list[str]) -> bool:
    return any(p.message_id in gold for p in item.provenance)


def judged(user: str, answer: Answer, gold: list[str]) -> tuple[JudgedItem, ...]:
    """How ``user`` judges the items of ``answer``."""
    out = []
    for item in answer.items:
        holds = _holds(item, gold)
        helped = {"summaries": holds and _summary(item), "examples": holds and not _summary(item)}.get(user, holds)
        out.append(JudgedItem(item.id, str(item.layer), item.kind, helped))
    return tuple(out)


def preferred_recall(user: str, answer: Answer, gold: list[str], k: int = 10) -> float:
    """Share of ``gold`` held by the top ``k`` items of the class ``user`` prefers (any class when neutral)."""
    keep = [i for i in answer.items[:k] if user == "neutral" or _summary(i) == (user == "summaries")]
    return sum(any(p.message_id == g for i in keep for p in i.provenance) for g in gold) / len(gold)


def _recall(answer: Answer, gold: list[str]) -> float:
    return preferred_recall("neutral", answer, gold)


def main() -> int:
    """Run every simulated user on every conversation; print and optionally write the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"))
    ap.add_argument("--work", default="/tmp/loc-base", help="folder of the built log and store")
    ap.add_argument("--feedback", type=int, default=5, help="judged answers per user and conversation")
    ap.add_argument("--set", action="append", default=[], help="RetrievalConfig field=value (e.g. style_weight=1)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    data = json.loads(Path(args.data).read_text())
    _, store, queries = built_store(data, Path(args.work))
    config = parse_set(args.set)
    retriever = Styled(store, queries, config)
    retriever.styles = {}
    rows: list[dict[str, Any]] = []
    pooled: dict[str, dict[str, list[float]]] = {u: {"pref0": [], "pref1": [], "r0": [], "r1": []} for u in USERS}
    cpu = {"without": 0.0, "with": 0.0, "questions": 0}
    for sample in data:
        owner = f"default:{sample['sample_id']}"
        turns = {m.message_id for m in store.rows("messages", owner) if isinstance(m, MessageRow)}
        asked = [
            (str(qa["question"]), gold)
            for qa in sample["qa"]
            if qa.get("category") in CATEGORIES and (gold := evidence_ids(qa, turns))
        ]
        taught, held = asked[: args.feedback], asked[args.feedback :]
        retriever.styles = {}
        plain = []
        started = time.process_time()
        for question, _ in held:
            plain.append(retriever.query(owner, question, top_k=10))
        cpu["without"] += time.process_time() - started
        for user in USERS:
            style = AnswerStyle()
            for question, gold in taught:
                style = style.with_items(judged(user, retriever.query(owner, question, top_k=10), gold))
            retriever.styles = {owner: style}
            started = time.process_time()
            adapted = [retriever.query(owner, q, top_k=10) for q, _ in held]
            cpu["with"] += time.process_time() - started
            cpu["questions"] += len(held) if user == USERS[0] else 0
            retriever.styles = {}
            figures = {
                "pref0": [preferred_recall(user, a, g) for a, (_, g) in zip(plain, held, strict=True)],
                "pref1": [preferred_recall(user, a, g) for a, (_, g) in zip(adapted, held, strict=True)],
                "r0": [_recall(a, g) for a, (_, g) in zip(plain, held, strict=True)],
                "r1": [_recall(a, g) for a, (_, g) in zip(adapted, held, strict=True)],
            }
            for name, values in figures.items():
                pooled[user][name] += values
            ranks = retriever.ranking_style(style) is not None
            row = {
                "conversation": sample["sample_id"],
                "user": user,
                "judged_answers": len(taught),
                "held_out_questions": len(held),
                "preference": round(style.preference, 3),
                "ranks": ranks,
                **{name: round(100 * statistics.fmean(values), 1) for name, values in figures.items()},
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {
        user: {name: round(100 * statistics.fmean(values), 1) for name, values in pooled[user].items()}
        for user in USERS
    }
    n = max(1, cpu["questions"])
    out = {
        "command": "python -m bench.personalise " + " ".join(sys.argv[1:]),
        "retrieval": {"name": config.name, "style_weight": config.style_weight, "changed": args.set},
        "legend": {
            "pref0/pref1": "preferred R@10 without / with the learned style (held-out questions)",
            "r0/r1": "plain evidence R@10 without / with the learned style",
        },
        "pooled": summary,
        "cpu_ms_per_question": {
            "without": round(1000 * cpu["without"] / n, 1),
            "with": round(1000 * cpu["with"] / (n * len(USERS)), 1),
        },
        "per_conversation": rows,
    }
    print(json.dumps({"pooled": summary, "cpu_ms_per_question": out["cpu_ms_per_question"]}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    queries.save()
    retriever.close()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
