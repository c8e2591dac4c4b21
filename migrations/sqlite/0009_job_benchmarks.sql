-- Jobs marked as benchmarks (`#ATRIUM --benchmark[=suite]` or the submission's
-- `benchmark` field): jobs.benchmark is the suite, or 'auto' to recognise it from the
-- output; jobs.benchmark_note says what became of it once the job ended (the run
-- recorded, or why nothing was). Ended, marked jobs without a note are still to read.
ALTER TABLE jobs ADD COLUMN benchmark TEXT;
ALTER TABLE jobs ADD COLUMN benchmark_note TEXT;
CREATE INDEX jobs_benchmark_unread ON jobs (end_time)
    WHERE benchmark IS NOT NULL AND benchmark_note IS NULL;
