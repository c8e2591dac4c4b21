-- Benchmark campaigns (issue 26): a template (a job script with parameters) and a matrix
-- of its values, submitted as job arrays whose tasks are recorded as benchmark runs.
-- campaigns.plan: the points as planned (JSON, server/src/benchmarks/campaign), so a
-- report reads them back as they were; template_script: the script used (a template may
-- change between campaigns). tasks: the number of jobs (array tasks) planned.
CREATE TABLE campaigns (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    user_name        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    template         TEXT    NOT NULL,
    title            TEXT    NOT NULL,
    template_script  TEXT    NOT NULL,
    matrix           TEXT    NOT NULL,
    plan             TEXT    NOT NULL,
    tasks            INTEGER NOT NULL CHECK (tasks >= 1),
    created_at       INTEGER NOT NULL
);
CREATE INDEX campaigns_template ON campaigns (template, user_name, id);
CREATE INDEX campaigns_user ON campaigns (user_name, id);

-- Each job array of a campaign, and which point and repetition each of its tasks runs
-- (JSON [[task, point, repetition], …]).
CREATE TABLE campaign_jobs (
    job_id       INTEGER PRIMARY KEY,
    campaign_id  INTEGER NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    gpus         INTEGER NOT NULL,
    tasks        TEXT    NOT NULL
);
CREATE INDEX campaign_jobs_campaign ON campaign_jobs (campaign_id);

-- A benchmark run recorded from a campaign's task: its point and repetition, and what
-- the job read while it ran (MB/s through read calls while it read, the share of it
-- from storage, where the figures come from), and how long it ran.
CREATE TABLE campaign_runs (
    run_id         INTEGER PRIMARY KEY REFERENCES benchmark_runs (id) ON DELETE CASCADE,
    campaign_id    INTEGER NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    point          INTEGER NOT NULL,
    repetition     INTEGER NOT NULL,
    job_id         INTEGER NOT NULL,
    task           INTEGER NOT NULL,
    read_mb_per_s  REAL,
    read_from_storage REAL,
    read_source    TEXT,
    duration_s     REAL
);
CREATE INDEX campaign_runs_campaign ON campaign_runs (campaign_id, point);
