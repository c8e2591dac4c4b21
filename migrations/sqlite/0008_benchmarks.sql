-- Benchmark outcomes (issue 8). Times are Unix milliseconds.
--
-- benchmark_runs: one recorded run of a benchmark suite (`tf_cnn_benchmarks`, `fio` …),
-- posted through the API or parsed from a job's output (job_id). Text fields that a
-- run does not say are NULL; tags are a comma-separated list. source is 'local', or the
-- published study of a reference run (seeded from the binary at startup, read-only).
CREATE TABLE benchmark_runs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    suite               TEXT    NOT NULL,
    model               TEXT,
    framework           TEXT,
    precision           TEXT,
    batch_size_per_gpu  INTEGER,
    gpus                INTEGER NOT NULL CHECK (gpus >= 0),
    nodes               INTEGER NOT NULL CHECK (nodes >= 1),
    gpu_model           TEXT,
    storage             TEXT,
    dataset             TEXT,
    started_at          INTEGER,
    ended_at            INTEGER,
    job_id              INTEGER,
    user_name           TEXT    NOT NULL,
    notes               TEXT,
    tags                TEXT    NOT NULL DEFAULT '',
    source              TEXT    NOT NULL DEFAULT 'local',
    created_at          INTEGER NOT NULL
);
-- The filters of the results table; a run's time is when it started, or when it was
-- recorded when its start is not known.
CREATE INDEX benchmark_runs_model ON benchmark_runs (model, gpu_model, storage);
CREATE INDEX benchmark_runs_suite ON benchmark_runs (suite, created_at);
CREATE INDEX benchmark_runs_source ON benchmark_runs (source, created_at);
CREATE INDEX benchmark_runs_user ON benchmark_runs (user_name, created_at);
CREATE INDEX benchmark_runs_job ON benchmark_runs (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX benchmark_runs_time ON benchmark_runs ((COALESCE(started_at, created_at)));

-- One measured figure of a run (`images_per_sec` 7220 `images/s`), so that runs can be
-- filtered and sorted by a metric.
CREATE TABLE benchmark_metrics (
    run_id  INTEGER NOT NULL REFERENCES benchmark_runs (id) ON DELETE CASCADE,
    name    TEXT    NOT NULL,
    value   DOUBLE PRECISION NOT NULL,
    unit    TEXT    NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX benchmark_metrics_name_value ON benchmark_metrics (name, value);

-- The version of the reference runs seeded from the binary (a hash of the published
-- figures it ships); the reference rows are replaced when it changes.
INSERT INTO meta (key, value) VALUES ('benchmark_reference', 0);
