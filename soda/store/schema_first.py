"""Soda's first schema migrations (m001-m005), applied in this order by
`soda.store.migrations.migrate`. Never edit one that has shipped: add a new one.
"""

from __future__ import annotations

from sqlite_utils import Database


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


MIGRATIONS = [m001_initial, m002_test_results, m004_learning_verdicts, m003_budgets, m005_questions]
"""In the order they apply (never reorder one that has shipped)."""
