-- What a job used: CPU time, memory and GPUs, as its step supervisor samples them
-- (server/src/launch/usage.rs), written while the job runs and once it ends.
-- `series` is the whole record as JSON (totals, one summary per GPU, the series of
-- points); the columns beside it are what listings sort and filter by.
-- `gpu_utilization` is the mean over the job's GPUs (NULL: no GPU reading).

CREATE TABLE job_usage (
    job_id            BIGINT  NOT NULL,
    task              BIGINT  NOT NULL DEFAULT -1,
    sampled_at        BIGINT  NOT NULL,
    complete          BIGINT  NOT NULL DEFAULT 0,
    cpu_seconds       DOUBLE PRECISION NOT NULL,
    max_rss_bytes     BIGINT  NOT NULL,
    gpu_idle_seconds  DOUBLE PRECISION NOT NULL DEFAULT 0,
    gpu_utilization   DOUBLE PRECISION,
    series            TEXT    NOT NULL,
    PRIMARY KEY (job_id, task)
);
CREATE INDEX job_usage_sampled ON job_usage (sampled_at);
