-- Quotas, accounting and node control (issue 7). Times are Unix milliseconds.
--
-- quotas: the limits of one user, group or account, or the default of every user
-- (scope_kind 'default', scope_name ''). limits is JSON: max_gpus, max_gpus_per_type,
-- max_gpu_hours, max_running_jobs, max_submitted_jobs, max_sessions, max_job_hours,
-- max_session_hours; an absent field is unlimited.
CREATE TABLE quotas (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    scope_kind  TEXT    NOT NULL CHECK (scope_kind IN ('default', 'user', 'group', 'account')),
    scope_name  TEXT    NOT NULL DEFAULT '',
    limits      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    updated_by  TEXT    NOT NULL,
    UNIQUE (scope_kind, scope_name)
);

-- jobs.gpu_milli: the GPUs a job was given, in thousandths of a whole GPU (a MIG
-- instance or a shard counts its fraction), recorded when it starts; GPU-seconds are
-- gpu_milli * (end_time - start_time) / 1e6.
ALTER TABLE jobs ADD COLUMN gpu_milli INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_user_end ON jobs (user_name, end_time);
CREATE INDEX jobs_end ON jobs (end_time);
