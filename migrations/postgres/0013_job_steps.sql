-- Job steps: each `srun` inside a running job, as `sacct` lists them (`JOBID.0`,
-- `JOBID.1` …). Recorded by the job itself through the API with its job token; the
-- step number is the next free one of its job. `task` is the array task (-1: none).
-- `state` is RUNNING until the step reports its end (COMPLETED, FAILED, CANCELLED).

CREATE TABLE job_steps (
    job_id       BIGINT NOT NULL,
    task         BIGINT NOT NULL DEFAULT -1,
    step_id      BIGINT NOT NULL,
    name         TEXT    NOT NULL,
    ntasks       BIGINT NOT NULL,
    gpus         TEXT    NOT NULL DEFAULT '',
    state        TEXT    NOT NULL,
    exit_code    BIGINT,
    exit_signal  BIGINT,
    start_time   BIGINT NOT NULL,
    end_time     BIGINT,
    PRIMARY KEY (job_id, task, step_id)
);
