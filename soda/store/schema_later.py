"""Schema migrations from m006 on, applied after `soda.store.schema_first`'s by
`soda.store.migrations.migrate`. Never edit one that has shipped: add a new one here.
"""

from __future__ import annotations

from sqlite_utils import Database


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


def m010_merge_approvals(db: Database) -> None:
    """A merge the gate may not make alone waits like a plan (`[approval] wait =
    "suspend"`): each wait's kind (plan or merge) and, for a merge, what was kept
    of each waiting task (its work's commit under refs/soda/approvals/, the
    gate's reason and the items the person is asked to look at)."""
    db.conn.executescript(
        """
        ALTER TABLE approvals ADD COLUMN kind TEXT NOT NULL DEFAULT 'plan'
            CHECK (kind IN ('plan', 'merge'));
        ALTER TABLE approvals ADD COLUMN merge_json TEXT;
        """
    )


def m011_progress(db: Database) -> None:
    """Whether each iteration made progress (`soda.loop.progress`): what it did that
    counts ("merged", "a person's input", ...; "none" when nothing did, NULL for an
    iteration cut short or recorded before this column), and the hash of the spec
    it read, so that the next iteration can tell a person's edit of the spec."""
    db.conn.executescript(
        """
        ALTER TABLE iterations ADD COLUMN progress TEXT;
        ALTER TABLE iterations ADD COLUMN spec_sha TEXT;
        """
    )


def m012_price_source(db: Database) -> None:
    """Where each call's price came from: "soda.toml" (a person's), "local" (a
    model on this machine, free), "genai-prices X.Y.Z" or "unknown"; NULL for
    calls recorded before soda said."""
    db.conn.executescript("ALTER TABLE agent_calls ADD COLUMN price_source TEXT;")


def m013_tracker(db: Database) -> None:
    """Work from the forge's issue tracker (`soda.forge.tracker`): each labelled
    issue seen, by its number and the forge's id, with its author and whether it
    was queued or kept as data; each comment on its thread, read once (the
    input it became, or why not); and each comment soda wrote back, by the
    event it tells of, so a restart never writes one twice."""
    db.conn.executescript(
        """
        CREATE TABLE tracker_items (
            number INTEGER PRIMARY KEY,
            forge_id INTEGER NOT NULL,
            title TEXT NOT NULL,
            author TEXT NOT NULL,
            association TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('queued', 'data', 'running', 'done',
                'stuck', 'halted', 'cancelled')),
            reason TEXT,
            spec TEXT,
            branch TEXT,
            depends_json TEXT NOT NULL DEFAULT '[]',
            body_sha TEXT,
            pr_number INTEGER,
            last_word TEXT,
            seen_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE tracker_comments (
            comment_id INTEGER PRIMARY KEY,
            number INTEGER NOT NULL,
            author TEXT NOT NULL,
            association TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('input', 'ignored', 'own')),
            reason TEXT,
            body TEXT NOT NULL,
            input_id INTEGER REFERENCES human_inputs(id),
            seen_at TEXT NOT NULL
        );
        CREATE INDEX tracker_comments_number ON tracker_comments(number);
        CREATE TABLE tracker_writes (
            number INTEGER NOT NULL,
            event TEXT NOT NULL,
            comment_id INTEGER,
            written_at TEXT NOT NULL,
            PRIMARY KEY (number, event)
        );
        """
    )


def m014_tracker_queue(db: Database) -> None:
    """The daemon works the tracker's queue: each item's labels (a priority label
    orders the queue) and when the forge last changed it (`seen`: an issue is
    looked at again only once it changed), and what was done to an issue besides
    comments (a label added or removed, a body edited), with who did it and
    whether soda acted on it or kept it as data (`key` names the forge's event,
    or the body's hash, so each is recorded once)."""
    db.conn.executescript(
        """
        ALTER TABLE tracker_items ADD COLUMN labels_json TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE tracker_items ADD COLUMN seen TEXT;
        CREATE TABLE tracker_notes (
            key TEXT PRIMARY KEY,
            number INTEGER NOT NULL,
            kind TEXT NOT NULL,
            author TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('acted', 'ignored')),
            detail TEXT NOT NULL,
            seen_at TEXT NOT NULL
        );
        CREATE INDEX tracker_notes_number ON tracker_notes(number);
        """
    )


def m015_tracker_fleet(db: Database) -> None:
    """`[tracker] fleet`: each queued issue runs as its own fleet run. Its run's id
    is written here before the run is started (so a restart starts it at most
    once), beside the issue's row."""
    db.conn.executescript(
        """
        CREATE TABLE tracker_runs (
            number INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL,
            started_at TEXT NOT NULL
        );
        """
    )


MIGRATIONS = [
    m006_milestone_digest,
    m007_bounded_reads,
    m008_forge,
    m009_approvals,
    m010_merge_approvals,
    m011_progress,
    m012_price_source,
    m013_tracker,
    m014_tracker_queue,
    m015_tracker_fleet,
]
"""In the order they apply (never reorder one that has shipped)."""
