-- Batch jobs: one row per job (task = -1) and one per started array task (task >= 0),
-- the scheduler's input log (replayed at startup) and its latest snapshot.
-- Times are Unix milliseconds, except sched_log/sched_snapshot which hold the
-- scheduler's own values inside their JSON.

CREATE TABLE jobs (
    id           INTEGER NOT NULL,
    task         INTEGER NOT NULL DEFAULT -1,
    user_name    TEXT    NOT NULL,
    account      TEXT    NOT NULL,
    partition    TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    reason       TEXT,
    array_spec   TEXT,
    script       TEXT    NOT NULL,
    request      TEXT    NOT NULL,
    environment  TEXT    NOT NULL,
    workdir      TEXT    NOT NULL,
    submit_dir   TEXT    NOT NULL,
    submit_time  INTEGER NOT NULL,
    start_time   INTEGER,
    end_time     INTEGER,
    time_limit   INTEGER,
    allocation   TEXT,
    nodelist     TEXT    NOT NULL DEFAULT '',
    cpus         INTEGER NOT NULL DEFAULT 0,
    memory_mb    INTEGER NOT NULL DEFAULT 0,
    gpus         TEXT    NOT NULL DEFAULT '',
    exit_code    INTEGER,
    exit_signal  INTEGER,
    stdout_path  TEXT,
    stderr_path  TEXT,
    message      TEXT,
    PRIMARY KEY (id, task)
);
CREATE INDEX jobs_user_submit ON jobs (user_name, submit_time);
CREATE INDEX jobs_submit ON jobs (submit_time);
CREATE INDEX jobs_active ON jobs (state) WHERE state IN ('PENDING', 'RUNNING', 'COMPLETING');

CREATE TABLE sched_log (
    seq    INTEGER PRIMARY KEY,
    event  TEXT    NOT NULL
);

CREATE TABLE sched_snapshot (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    seq   INTEGER NOT NULL,
    data  TEXT    NOT NULL
);
