"""Append-only schema migrations, in the manner of simonw/llm.

Each migration is a named function, applied once and recorded in `_migrations`.
Never edit or reorder a migration that has shipped: add a new one. A database
that has a migration this code does not know was written by a newer soda and is
refused rather than risk writing to a schema we do not understand.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlite_utils import Database

from soda.errors import DatabaseTooNew

Migration = Callable[[Database], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


def migrate(db: Database) -> list[str]:
    """Apply pending migrations in order; return the names applied."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in db.execute("SELECT name FROM _migrations").fetchall()}
    known = {fn.__name__ for fn in MIGRATIONS}
    unknown = sorted(done - known)
    if unknown:
        raise DatabaseTooNew(
            f"{db.conn.execute('PRAGMA database_list').fetchone()[2]} was written by a newer "
            f"soda (unknown migrations: {', '.join(unknown)}); upgrade soda to open it"
        )
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        with db.conn:
            fn(db)
            db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                [fn.__name__, datetime.now(UTC).isoformat(timespec="milliseconds")],
            )
        applied.append(fn.__name__)
    return applied


@migration
def m001_initial(db: Database) -> None:
    """The first schema: runs, iterations, agent calls, Trace, inbox, learnings,
    events and halts."""
    db.conn.executescript(
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            started_at TEXT NOT NULL,
            ended_at TEXT,
            spec_path TEXT NOT NULL,
            milestone TEXT NOT NULL,
            milestone_branch TEXT NOT NULL,
            base_branch TEXT NOT NULL,
            base_commit TEXT,
            provider TEXT,
            status TEXT NOT NULL DEFAULT 'running',
            final_reason TEXT,
            pid INTEGER
        );
        CREATE TABLE iterations (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            number INTEGER NOT NULL UNIQUE,
            started_at TEXT NOT NULL,
            ended_at TEXT,
            phase TEXT NOT NULL DEFAULT 'sense',
            claims_json TEXT,
            orient_json TEXT,
            decision TEXT,
            decision_reason TEXT,
            intent TEXT,
            act_json TEXT,
            outcome TEXT,
            merged_commit TEXT,
            duration_s REAL,
            tokens_in INTEGER NOT NULL DEFAULT 0,
            tokens_out INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL NOT NULL DEFAULT 0,
            error TEXT
        );
        CREATE INDEX iterations_run ON iterations(run_id);
        CREATE TABLE agent_calls (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id),
            iteration_id INTEGER REFERENCES iterations(id),
            agent TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            turn INTEGER NOT NULL,
            started_at TEXT NOT NULL,
            latency_ms INTEGER NOT NULL,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL NOT NULL DEFAULT 0,
            stop_reason TEXT,
            response_json TEXT
        );
        CREATE INDEX agent_calls_iteration ON agent_calls(iteration_id);
        CREATE TABLE tasks (
            id INTEGER PRIMARY KEY,
            milestone TEXT NOT NULL,
            parent_id INTEGER REFERENCES tasks(id),
            title TEXT NOT NULL,
            description TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'open'
                CHECK (status IN ('open', 'in_progress', 'blocked', 'closed')),
            status_reason TEXT,
            risk TEXT NOT NULL DEFAULT 'low',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            closed_at TEXT
        );
        CREATE INDEX tasks_milestone_status ON tasks(milestone, status);
        CREATE TABLE task_comments (
            id INTEGER PRIMARY KEY,
            task_id INTEGER NOT NULL REFERENCES tasks(id),
            author TEXT NOT NULL,
            body TEXT NOT NULL,
            iteration_id INTEGER REFERENCES iterations(id),
            created_at TEXT NOT NULL
        );
        CREATE INDEX task_comments_task ON task_comments(task_id);
        CREATE TABLE human_inputs (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            payload_json TEXT NOT NULL,
            source TEXT NOT NULL,
            source_file TEXT,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'claimed', 'applied')),
            received_at TEXT NOT NULL,
            claimed_iteration INTEGER,
            applied_iteration INTEGER,
            applied_at TEXT,
            response TEXT
        );
        CREATE INDEX human_inputs_status ON human_inputs(status);
        CREATE TABLE learnings (
            id INTEGER PRIMARY KEY,
            text TEXT NOT NULL,
            source_agent TEXT NOT NULL,
            iteration_id INTEGER REFERENCES iterations(id),
            active INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL
        );
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            ts TEXT NOT NULL,
            run_id INTEGER,
            iteration_id INTEGER,
            kind TEXT NOT NULL,
            data_json TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX events_kind ON events(kind);
        CREATE TABLE halts (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id),
            iteration_id INTEGER REFERENCES iterations(id),
            agent TEXT,
            error_type TEXT NOT NULL,
            message TEXT NOT NULL,
            violation_path TEXT,
            violation_rule TEXT,
            raw_output TEXT,
            created_at TEXT NOT NULL
        );
        """
    )


@migration
def m002_test_results(db: Database) -> None:
    """Test runs cached by tree id and test setup: an unchanged milestone tip is
    never tested twice (the gate's baseline, DONE's confirmation)."""
    db.conn.executescript(
        """
        CREATE TABLE test_results (
            id INTEGER PRIMARY KEY,
            tree TEXT NOT NULL,
            setup TEXT NOT NULL,
            commit_sha TEXT NOT NULL,
            summary TEXT NOT NULL,
            report_json TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (tree, setup)
        );
        """
    )


@migration
def m004_learning_verdicts(db: Database) -> None:
    """Learnings are retired, never deleted: by the verifier's verdict or by the
    [context] max_learnings cap, with the reason and the iteration recorded, so a
    retired learning is neither shown again nor learned a second time."""
    db.conn.executescript(
        """
        ALTER TABLE learnings ADD COLUMN retired_reason TEXT;
        ALTER TABLE learnings ADD COLUMN retired_iteration_id INTEGER;
        ALTER TABLE learnings ADD COLUMN retired_at TEXT;
        """
    )


@migration
def m003_budgets(db: Database) -> None:
    """Budgets with a clear scope and wakes that cost nothing: `budget_resets`
    records when `soda budget reset` made today's spend count again from zero
    (from the model call after `after_call_id`), and
    `iterations.fingerprint` keeps what ORIENT would see after each iteration, so
    a daemon wake with nothing new makes no model call."""
    db.conn.executescript(
        """
        CREATE TABLE budget_resets (
            id INTEGER PRIMARY KEY,
            budget TEXT NOT NULL,
            after_call_id INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
        ALTER TABLE iterations ADD COLUMN fingerprint TEXT;
        """
    )


@migration
def m005_questions(db: Database) -> None:
    """Questions agents ask a person (`ask_human`), with the asking executor's
    conversation so its task resumes where it stopped; and each iteration's short
    report (done, failed, skipped, retried, open questions, confidence)."""
    db.conn.executescript(
        """
        CREATE TABLE questions (
            id INTEGER PRIMARY KEY,
            iteration_id INTEGER REFERENCES iterations(id),
            iteration INTEGER NOT NULL,
            task_key TEXT,
            task_id INTEGER,
            agent TEXT NOT NULL,
            question TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'open',
            answer TEXT,
            call_id TEXT,
            conversation_json TEXT,
            asked_at TEXT NOT NULL,
            answered_at TEXT,
            resumed_at TEXT
        );
        CREATE INDEX questions_status ON questions(status);
        ALTER TABLE iterations ADD COLUMN report_json TEXT;
        """
    )


@migration
def m006_milestone_digest(db: Database) -> None:
    """What SENSE tells of the milestone since its base (its commits and its
    diffstat), kept per (branch, base) and advanced as the branch moves, so that
    SENSE does not walk the whole milestone every iteration (soda.repo.digest):
    the digest at one tip, the generation of every commit of the milestone (the
    order of commits made within a second), and one row per changed file."""
    db.conn.executescript(
        """
        CREATE TABLE milestone_digests (
            id INTEGER PRIMARY KEY,
            branch TEXT NOT NULL,
            base TEXT NOT NULL,
            head TEXT NOT NULL,
            state_json TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (branch, base)
        );
        CREATE TABLE milestone_commits (
            digest_id INTEGER NOT NULL REFERENCES milestone_digests(id) ON DELETE CASCADE,
            sha TEXT NOT NULL,
            gen INTEGER NOT NULL,
            PRIMARY KEY (digest_id, sha)
        ) WITHOUT ROWID;
        CREATE TABLE milestone_files (
            digest_id INTEGER NOT NULL REFERENCES milestone_digests(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            shown TEXT NOT NULL,
            added INTEGER NOT NULL,
            removed INTEGER NOT NULL,
            binary INTEGER NOT NULL,
            churn INTEGER NOT NULL,
            status TEXT NOT NULL,
            source TEXT,
            PRIMARY KEY (digest_id, path)
        ) WITHOUT ROWID;
        CREATE INDEX milestone_files_churn ON milestone_files(digest_id, churn DESC, shown);
        CREATE INDEX milestone_files_source ON milestone_files(digest_id, source)
            WHERE source IS NOT NULL;
        """
    )


@migration
def m007_bounded_reads(db: Database) -> None:
    """Indexes for the reads every iteration makes, so that none of them reads a
    row per past iteration (bench/long_run.py --explain lists the costliest): a
    run's recent iterations, the milestone's root task, the recently closed
    tasks, active learnings and
    known learning texts, the inputs a person's answers were applied in, the
    last pause or resume, where a run's (or a day's) model calls begin (their
    costs are then summed from there on, and the sums kept while no call is
    changed or removed, which `agent_calls_epoch` counts:
    soda.store.agent_calls.summed_cost). And a version per milestone's tasks, bumped by
    triggers when a task is added, removed or changes status, so the wake
    fingerprint need not read every task."""
    db.conn.executescript(
        """
        CREATE INDEX iterations_run_number ON iterations(run_id, number);
        CREATE INDEX tasks_closed ON tasks(milestone, status, closed_at, id);
        CREATE INDEX tasks_parent ON tasks(milestone, parent_id);
        CREATE INDEX learnings_active ON learnings(active, id);
        CREATE INDEX learnings_text ON learnings(text);
        CREATE INDEX human_inputs_applied ON human_inputs(applied_iteration);
        CREATE INDEX human_inputs_kind ON human_inputs(kind, id);
        CREATE INDEX agent_calls_run ON agent_calls(run_id);
        CREATE INDEX agent_calls_started ON agent_calls(started_at);
        CREATE TABLE agent_calls_epoch (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            epoch INTEGER NOT NULL
        );
        INSERT INTO agent_calls_epoch (id, epoch) VALUES (1, 0);
        CREATE TRIGGER agent_calls_updated AFTER UPDATE ON agent_calls BEGIN
            UPDATE agent_calls_epoch SET epoch = epoch + 1 WHERE id = 1;
        END;
        CREATE TRIGGER agent_calls_deleted AFTER DELETE ON agent_calls BEGIN
            UPDATE agent_calls_epoch SET epoch = epoch + 1 WHERE id = 1;
        END;
        CREATE TABLE task_versions (
            milestone TEXT PRIMARY KEY,
            version INTEGER NOT NULL
        );
        INSERT INTO task_versions (milestone, version)
            SELECT milestone, count(*) FROM tasks GROUP BY milestone;
        CREATE TRIGGER task_versions_insert AFTER INSERT ON tasks BEGIN
            INSERT INTO task_versions (milestone, version) VALUES (NEW.milestone, 1)
                ON CONFLICT (milestone) DO UPDATE SET version = version + 1;
        END;
        CREATE TRIGGER task_versions_update AFTER UPDATE OF status, milestone ON tasks BEGIN
            INSERT INTO task_versions (milestone, version) VALUES (NEW.milestone, 1)
                ON CONFLICT (milestone) DO UPDATE SET version = version + 1;
            INSERT INTO task_versions (milestone, version) VALUES (OLD.milestone, 1)
                ON CONFLICT (milestone) DO UPDATE SET version = version + 1;
        END;
        CREATE TRIGGER task_versions_delete AFTER DELETE ON tasks BEGIN
            INSERT INTO task_versions (milestone, version) VALUES (OLD.milestone, 1)
                ON CONFLICT (milestone) DO UPDATE SET version = version + 1;
        END;
        """
    )


@migration
def m008_forge(db: Database) -> None:
    """Pull requests (soda.forge): the milestone's pull request and what soda pushed
    and wrote to it, its head's checks as last read and whether DONE waits for them;
    every comment seen on it, once, with what became of it (a correction input,
    ignored, or soda's own) and soda's reply; the ETag of each response read."""
    db.conn.executescript(
        """
        CREATE TABLE forge_pulls (
            branch TEXT PRIMARY KEY, repository TEXT NOT NULL, number INTEGER, node_id TEXT,
            url TEXT, draft INTEGER NOT NULL DEFAULT 1, state TEXT NOT NULL DEFAULT 'open',
            pushed_sha TEXT, body_sha TEXT, head_sha TEXT,
            checks_json TEXT NOT NULL DEFAULT '[]', has_checks INTEGER NOT NULL DEFAULT 0,
            done_sha TEXT, merged INTEGER NOT NULL DEFAULT 0, polled_at TEXT,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE forge_items (
            kind TEXT NOT NULL, item_id INTEGER NOT NULL, pr_number INTEGER NOT NULL,
            author TEXT NOT NULL, association TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('input', 'ignored', 'own')), reason TEXT,
            input_id INTEGER REFERENCES human_inputs(id), path TEXT, line INTEGER,
            reply_commit TEXT, replied_at TEXT, seen_at TEXT NOT NULL,
            PRIMARY KEY (kind, item_id)
        );
        CREATE INDEX forge_items_input ON forge_items(input_id) WHERE input_id IS NOT NULL;
        CREATE TABLE forge_etags (url TEXT PRIMARY KEY, etag TEXT NOT NULL, body TEXT NOT NULL);
        """
    )


@migration
def m009_approvals(db: Database) -> None:
    """Plans waiting for a person's approval across iterations (`[approval] wait =
    "suspend"`, and every fleet run): the plan, its deadline (seconds since the
    epoch) and how the wait ended."""
    db.conn.executescript(
        """
        CREATE TABLE approvals (
            id INTEGER PRIMARY KEY,
            iteration_id INTEGER REFERENCES iterations(id),
            iteration INTEGER NOT NULL,
            plan_json TEXT NOT NULL,
            timeout REAL NOT NULL,
            deadline REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'waiting'
                CHECK (status IN ('waiting', 'approved', 'rejected')),
            reason TEXT,
            asked_at TEXT NOT NULL,
            settled_at TEXT
        );
        CREATE INDEX approvals_status ON approvals(status);
        """
    )
