-- Interactive sessions (JupyterLab, terminal, TensorBoard): each is a job of the
-- scheduler plus what the proxy needs to reach it. Times are Unix milliseconds.
-- jobs.container: the environment a job runs in (runtime, image, mounts), as JSON.

CREATE TABLE sessions (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    user_name      TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    kind           TEXT    NOT NULL CHECK (kind IN ('notebook', 'terminal', 'tensorboard')),
    environment    TEXT    NOT NULL,
    job_id         INTEGER,
    gres           TEXT    NOT NULL DEFAULT '',
    logdir         TEXT,
    socket_dir     TEXT    NOT NULL,
    secret         TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('pending', 'starting', 'ready', 'stopping', 'ended')),
    end_reason     TEXT,
    message        TEXT,
    created_at     INTEGER NOT NULL,
    ready_at       INTEGER,
    ended_at       INTEGER,
    last_activity  INTEGER
);
CREATE UNIQUE INDEX sessions_active_name ON sessions (user_name, name) WHERE ended_at IS NULL;
CREATE INDEX sessions_user ON sessions (user_name, created_at);
CREATE INDEX sessions_job ON sessions (job_id);

ALTER TABLE jobs ADD COLUMN container TEXT;
