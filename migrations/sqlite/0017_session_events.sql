-- Sessions run apps defined in the configuration ([[apps]], server/src/config/apps.rs):
-- `kind` holds an app's id, no longer only notebook, terminal or tensorboard (rows
-- that hold those keep them: they are the built-in apps' ids). SQLite cannot drop a
-- CHECK constraint, so the table is rebuilt with the same rows and indexes.
-- `events`: a session's event log (queued, placed on a node, its server started, ready,
-- how it ended), as JSON [{at, message}], written when the session ends so that its
-- progress page shows it afterwards (server/src/sessions/watch.rs). NULL: only the
-- row's times.

CREATE TABLE sessions_new (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    user_name      TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    kind           TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
    environment    TEXT    NOT NULL,
    job_id         INTEGER,
    logdir         TEXT,
    socket_dir     TEXT    NOT NULL,
    secret         TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('pending', 'starting', 'ready', 'stopping', 'ended')),
    end_reason     TEXT,
    message        TEXT,
    created_at     INTEGER NOT NULL,
    ready_at       INTEGER,
    ended_at       INTEGER,
    last_activity  INTEGER,
    gpu_kind       TEXT CHECK (gpu_kind IN ('gpu', 'shard')),
    gpu_type       TEXT,
    gpu_count      INTEGER NOT NULL DEFAULT 0,
    events         TEXT
);
INSERT INTO sessions_new (id, user_name, name, kind, environment, job_id, logdir, socket_dir,
        secret, state, end_reason, message, created_at, ready_at, ended_at, last_activity,
        gpu_kind, gpu_type, gpu_count)
    SELECT id, user_name, name, kind, environment, job_id, logdir, socket_dir,
        secret, state, end_reason, message, created_at, ready_at, ended_at, last_activity,
        gpu_kind, gpu_type, gpu_count
    FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE UNIQUE INDEX sessions_active_name ON sessions (user_name, name) WHERE ended_at IS NULL;
CREATE INDEX sessions_user ON sessions (user_name, created_at);
CREATE INDEX sessions_job ON sessions (job_id);
