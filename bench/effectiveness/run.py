"""soda's effectiveness benchmark: run soda on a suite of small tasks, judge each
with acceptance tests it never saw, and report solved / iterations / tokens /
cost / wall time per task and in total.

    python bench/effectiveness/run.py --model fake            # offline: proves the harness
    python bench/effectiveness/run.py --config my-soda.toml   # the model a soda.toml configures
    python bench/effectiveness/run.py --provider anthropic --model claude-sonnet-4-6
    python bench/effectiveness/run.py --provider openai --base-url http://127.0.0.1:11434/v1 \\
        --model qwen2.5-coder:32b
    ... --tasks off-by-one,cli-flag --json --workdir /tmp/bench --check --list

Tasks live in bench/effectiveness/tasks/ (see suite.py for their shape). Exit
code 0 when the suite ran (whatever it solved), 1 when `--check` found a broken
task, 2 for bad arguments or configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

if __package__ in (None, ""):  # run as a script: make `bench.` and `soda` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.effectiveness.harness import ModelChoice, run_suite
from bench.effectiveness.report import as_json, table
from bench.effectiveness.suite import Task, TaskError, all_tasks, select
from soda.config import Config
from soda.errors import ConfigError
from soda.llm.providers import check_provider, provider_for

FAKES = {"fake": "solve", "fake-wrong": "wrong", "fake-stall": "stall"}
FAKE_NOTE = (
    "offline behavioural fake that knows each task's solution: it proves the harness"
    " (loop, gate, acceptance), not a model; tokens are estimates, cost 0"
)


class UsageError(Exception):
    """Bad arguments or configuration: exit 2 with the message."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="run.py",
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model",
        help="model id for the strong (and fast) tier; or fake (offline: solves every "
        "task), fake-wrong (claims done with a plausible wrong change), fake-stall "
        "(never ends: shows the timeout)",
    )
    parser.add_argument("--config", type=Path, help="a soda.toml: its [model], [sandbox], ...")
    parser.add_argument("--provider", help="anthropic, openai, ... (overrides --config's)")
    parser.add_argument("--fast-model", help="model id for the fast tier (default: --model)")
    parser.add_argument("--base-url", help="the provider's API address (a local server)")
    parser.add_argument("--tasks", help="comma-separated task names (default: all)")
    parser.add_argument("--timeout", type=float, help="seconds per task (overrides task.toml)")
    parser.add_argument("--max-iterations", type=int, help="per task (overrides task.toml)")
    parser.add_argument("--max-cost", type=float, help="USD per task (overrides task.toml)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--workdir", type=Path, help="build and keep the task repositories here")
    parser.add_argument("--list", action="store_true", help="list the tasks and stop")
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the tasks themselves (start fails, solution passes, wrong fails); no model",
    )
    return parser.parse_args(argv)


def model_choice(args: argparse.Namespace) -> ModelChoice:
    """The fake, or the person's provider settings (a soda.toml and/or flags)."""
    if args.model in FAKES:
        if args.config or args.provider:
            raise UsageError(f"--model {args.model} is offline; it takes no --config or --provider")
        return ModelChoice.offline(FAKES[args.model])
    if not (args.config or args.provider or args.model):
        raise UsageError(
            "say which model answers: --model fake (offline), --config my-soda.toml, "
            "or --provider anthropic --model MODEL_ID"
        )
    try:
        base = person_config(args.config.resolve()) if args.config else Config()
        update: dict[str, Any] = {}
        if args.provider:
            update["provider"] = args.provider
        if args.model:
            update |= {"strong": args.model, "fast": args.fast_model or args.model}
        elif args.fast_model:
            update["fast"] = args.fast_model
        if args.base_url:
            update["base_url"] = args.base_url
        model = base.model.model_copy(update=update)
        base = check_provider(base.model_copy(update={"model": model}))
        provider = provider_for(model.provider)
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    if provider.needs_key and not os.environ.get(model.api_key_env):
        raise UsageError(f"{provider.label}: set {model.api_key_env} (model.api_key_env)")
    label = f"{model.provider}: strong {model.strong}, fast {model.fast}"
    return ModelChoice(label, None, base)


def person_config(path: Path) -> Config:
    """The config in `path`, validated as soda validates it, without its [project]
    section: each task brings its own spec, test command and limits."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it: {exc}") from exc
    data.pop("project", None)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        raise UsageError(f"{path}: " + "; ".join(problems)) from exc
    config.root = path.parent
    return config


def limited(task: Task, args: argparse.Namespace) -> Task:
    """`task` with the limits given on the command line instead of its own."""
    given = {
        "timeout_seconds": args.timeout,
        "max_iterations": args.max_iterations,
        "max_cost_usd": args.max_cost,
    }
    update = {key: value for key, value in given.items() if value is not None}
    if any(value <= 0 for value in update.values()):
        raise UsageError("--timeout, --max-iterations and --max-cost must be above 0")
    return dataclasses.replace(task, limits=dataclasses.replace(task.limits, **update))


def model_json(choice: ModelChoice) -> dict[str, Any]:
    model = choice.base.model
    return {
        "label": choice.label,
        "fake": choice.fake,
        "provider": None if choice.fake else model.provider,
        "strong": model.strong,
        "fast": model.fast,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else print
    try:
        tasks = [limited(task, args) for task in select(all_tasks(), args.tasks)]
        if args.list:
            for task in tasks:
                print(f"{task.name:20} {task.difficulty:7} {task.title}")
            return 0
        if importlib.util.find_spec("pytest") is None:
            raise UsageError("the tasks' tests run with pytest on this Python: pip install pytest")
        if args.check:
            return check(tasks, args.workdir, say)
        choice = model_choice(args)
    except (UsageError, TaskError) as exc:
        print(f"run.py: {exc}", file=sys.stderr)
        return 2
    label = f"{choice.label} ({FAKE_NOTE})" if choice.fake == "solve" else choice.label
    say(f"soda effectiveness benchmark: {len(tasks)} task(s), model {choice.label}")
    with tempfile.TemporaryDirectory(prefix="soda-bench-") as temp:
        workdir = args.workdir.resolve() if args.workdir else Path(temp)
        rows = run_suite(tasks, choice, workdir, keep=args.workdir is not None, say=say)
    if args.json:
        print(json.dumps(as_json(rows, model_json(choice)), indent=2))
    else:
        print()
        print(table(rows, label))
    return 0


def check(tasks: list[Task], workdir: Path | None, say: Callable[[str], None]) -> int:
    from bench.effectiveness.check import check_task

    broken = 0
    with tempfile.TemporaryDirectory(prefix="soda-bench-check-") as temp:
        root = workdir.resolve() if workdir else Path(temp)
        for task in tasks:
            problems = check_task(task, root / task.name)
            broken += bool(problems)
            say(f"{task.name}: " + ("ok" if not problems else "; ".join(problems)))
    say(f"{len(tasks) - broken} of {len(tasks)} task(s) sound")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
