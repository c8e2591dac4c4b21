-- Foundation schema: users, groups, browser login sessions, API tokens, audit log.
-- Flags are 0/1 integers and times are Unix milliseconds (INTEGER) so that SQLite and PostgreSQL share one logical schema.

CREATE TABLE users (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    username       TEXT    NOT NULL UNIQUE,
    display_name   TEXT    NOT NULL DEFAULT '',
    email          TEXT    NOT NULL DEFAULT '',
    source         TEXT    NOT NULL CHECK (source IN ('local', 'ldap')),
    password_hash  TEXT,
    uid_number     INTEGER,
    gid_number     INTEGER,
    home           TEXT,
    login_shell    TEXT,
    disabled       INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    last_login_at  INTEGER
);

CREATE TABLE groups (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL UNIQUE,
    gid_number  INTEGER,
    source      TEXT    NOT NULL CHECK (source IN ('local', 'ldap')),
    created_at  INTEGER NOT NULL
);

CREATE TABLE memberships (
    user_id   INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    group_id  INTEGER NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    PRIMARY KEY (user_id, group_id)
);
CREATE INDEX memberships_group ON memberships (group_id);

CREATE TABLE login_sessions (
    id           TEXT    PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    client_addr  TEXT    NOT NULL DEFAULT '',
    user_agent   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX login_sessions_user ON login_sessions (user_id);

CREATE TABLE api_tokens (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name          TEXT    NOT NULL,
    token_hash    TEXT    NOT NULL UNIQUE,
    scopes        TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER,
    last_used_at  INTEGER,
    revoked_at    INTEGER
);
CREATE UNIQUE INDEX api_tokens_active_name ON api_tokens (user_id, name) WHERE revoked_at IS NULL;

CREATE TABLE audit_log (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           INTEGER NOT NULL,
    actor        TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    target       TEXT    NOT NULL DEFAULT '',
    detail       TEXT    NOT NULL DEFAULT '{}',
    client_addr  TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_at ON audit_log (at);

-- Small counters shared by every process using this database (the server and the CLI).
-- auth_epoch is bumped whenever a credential is revoked or a user disabled, so that a
-- running server drops what it cached.
CREATE TABLE meta (
    key    TEXT    PRIMARY KEY,
    value  INTEGER NOT NULL
);
INSERT INTO meta (key, value) VALUES ('auth_epoch', 0);
