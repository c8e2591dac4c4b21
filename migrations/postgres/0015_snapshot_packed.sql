-- Format 3 of the scheduler snapshot: format 2's JSON compressed with gzip, in
-- `packed` (`data` is then empty). A queue of 100,000 jobs is a 30 MB text but a
-- small blob, so writing a snapshot holds the database's write lock briefly.
ALTER TABLE sched_snapshot ADD COLUMN packed BYTEA;
