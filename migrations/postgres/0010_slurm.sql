-- Jobs run by Slurm (`[scheduler] backend = "slurm"`): jobs.slurm_id is Slurm's id of
-- the job (its array job id for an array and its tasks). Rows of the Slurm backend
-- that have not ended are the jobs it polls; the state in the row is the last one
-- Slurm reported.
ALTER TABLE jobs ADD COLUMN slurm_id TEXT;
CREATE INDEX jobs_slurm_open ON jobs (slurm_id) WHERE slurm_id IS NOT NULL AND end_time IS NULL;
