"""Loop detection for SENSE: the run's recent attempts (`recent_attempts`), when
two are the same (`same_attempt`, `intent_words`), and what that means for the
run (`loop_status`: a warning to ORIENT, or STUCK)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlite_utils import Database

from soda.config import LoopConfig
from soda.contracts import LoopStatus
from soda.contracts.outcomes import LOOP_OUTCOMES, IterationOutcome
from soda.gate.evidence import json_object
from soda.store import runs

# --- loop detection ------------------------------------------------------------
#
# An attempt is one of the run's recent iterations. Two attempts are the same when
# their intents use mostly the same words (after normalization), they ended in the
# same class of failure, and, where both sides record them, they worked on the same
# Trace tasks or ended with the same failing tests. `loop_threshold` such attempts
# in the window warn ORIENT; `warned_repeats` more stop the run as STUCK. Which
# outcomes count, and as which class, is `soda.contracts.outcomes.LOOP_OUTCOMES`.

MAX_INTENT_CHARS = 200
DONE_CLAIM = "declare the spec met"
"""The attempt an iteration made when ORIENT said the spec is met and the tests
refused it (it has no plan, so no intent of its own)."""
MAX_FAILING_NAMED = 3

_STOPWORDS = frozenset(
    """a an the to of in on for with and or so that this these those it its by from into
    as at be is are was were all any some new again also then now via which when
    py js ts rs rb md txt toml json""".split()  # noqa: SIM905 (a word list reads best as text)
)
_GENERIC = frozenset(
    """function functions method methods feature support code logic implementation
    functionality properly correctly""".split()  # noqa: SIM905
)
"""Words that say nothing about which work it is ("implement the divide function")."""
_DROPPED = _STOPWORDS | _GENERIC


def _stem(word: str) -> str:
    """A crude stem, applied the same way to both sides: divide/divides/divided -> divid."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


_SYNONYMS = {
    _stem(word): canonical
    for canonical, words in {
        "add": "add implement create write written introduce build make provide define",
        "fix": "fix repair correct resolve debug patch",
        "change": "change update modify adjust edit rework",
        "remove": "remove delete drop eliminate",
    }.items()
    for word in words.split()
}


def intent_words(intent: str) -> frozenset[str]:
    """The intent as a set of normalized words: camelCase and snake_case split,
    punctuation, stopwords and generic words dropped, stemmed, verbs of the same
    meaning merged ("implement" = "add")."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", intent).lower()
    words = (w for w in re.findall(r"[a-z0-9]+", spaced) if w not in _DROPPED)
    return frozenset(_SYNONYMS.get(stem, stem) for stem in map(_stem, words))


def intent_similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two word sets (1.0 for two empty ones)."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


@dataclass(frozen=True)
class Attempt:
    """One recent iteration as loop detection compares it."""

    number: int
    intent: str
    outcome: str | None
    tasks: frozenset[int] = frozenset()
    """Trace tasks it worked on (ACT's record, else its plan)."""
    failing: frozenset[str] = frozenset()
    """Tests the gate held against it."""
    words: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "words", intent_words(self.intent))


def same_attempt(a: Attempt, b: Attempt, similarity: float) -> bool:
    """Similar intents, the same failure class, and (when both record them) the
    same Trace tasks or the same failing tests."""
    kind = LOOP_OUTCOMES.get(a.outcome or "")
    if kind is None or kind != LOOP_OUTCOMES.get(b.outcome or ""):
        return False
    if intent_similarity(a.words, b.words) < similarity:
        return False
    evidence = []
    if a.tasks and b.tasks:
        evidence.append(a.tasks == b.tasks)
    if a.failing and b.failing:
        evidence.append(a.failing == b.failing)
    return any(evidence) if evidence else True


def recent_attempts(db: Database, run_id: int, before: int, window: int) -> list[Attempt]:
    """The run's last `window` iterations before `before`, newest first, in one query.
    The window is picked walking the run's index backwards (ids grow with numbers), so
    the cost does not grow with the run's age; the JSON records are read only for
    these rows, and only for outcomes that can count toward a loop."""
    rows = runs.window_records(db, run_id, before, window, LOOP_OUTCOMES)
    attempts = []
    for number, intent, outcome, act_json, orient_json in rows:
        if outcome == IterationOutcome.DONE_REFUSED:  # no plan: the claim is the attempt
            intent = intent or DONE_CLAIM
        if not intent:
            continue
        act = json_object(act_json)
        tasks = _task_ids(act.get("tasks"))
        if not tasks:
            plan = json_object(orient_json).get("iteration_plan")
            tasks = _task_ids(plan.get("tasks") if isinstance(plan, dict) else None)
        failing = act.get("failing")
        attempts.append(
            Attempt(
                number=number,
                intent=intent,
                outcome=outcome,
                tasks=tasks,
                failing=frozenset(failing) if isinstance(failing, dict) else frozenset(),
            )
        )
    return attempts


def _task_ids(tasks: object) -> frozenset[int]:
    if not isinstance(tasks, list):
        return frozenset()
    return frozenset(
        t["task_id"] for t in tasks if isinstance(t, dict) and isinstance(t.get("task_id"), int)
    )


def loop_status(attempts: list[Attempt], config: LoopConfig) -> LoopStatus:
    """The largest group of same attempts among the last `loop_window` iterations
    (newest first): `loop_threshold` of them warn ORIENT, `warned_repeats` more are
    a loop."""
    window = attempts[: config.loop_window]
    group: list[Attempt] = []
    for anchor in window:
        same = [a for a in window if same_attempt(anchor, a, config.intent_similarity)]
        if len(same) > len(group):
            group = same
    count = len(group)
    if count < config.loop_threshold:
        return LoopStatus(detected=False, detail="no repetition", warning=None)
    intent = group[0].intent.strip()
    if len(intent) > MAX_INTENT_CHARS:
        intent = intent[:MAX_INTENT_CHARS] + "..."
    numbers = ", ".join(str(a.number) for a in group)
    ended = " or ".join(dict.fromkeys(a.outcome or "" for a in group))
    failing = sorted(frozenset().union(*(a.failing for a in group)))
    if failing:
        extra = len(failing) - MAX_FAILING_NAMED
        named = ", ".join(failing[:MAX_FAILING_NAMED]) + (f" +{extra} more" if extra > 0 else "")
        ended += f" (failing: {named})"
    tried = f'"{intent}" {count} times (iterations {numbers}); it ended {ended}'
    left = config.loop_threshold + config.warned_repeats - count
    if left > 0:
        more = (
            "One more similar attempt stops" if left == 1 else f"{left} more similar attempts stop"
        )
        return LoopStatus(
            detected=False,
            detail=f"tried {tried}",
            warning=f"you have tried {tried}. {more} the run as STUCK: change the approach "
            "(a smaller step, another task, a different fix), or set actionable_work_exists "
            "false and say what a person must do.",
        )
    after = f", {count - config.loop_threshold} after a warning" if config.warned_repeats else ""
    return LoopStatus(
        detected=True,
        detail=f"tried {tried}{after}",
        warning=f"you have tried {tried}; the run stops as STUCK.",
    )
