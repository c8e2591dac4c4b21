-- The scheduler snapshot's format: 1, the scheduler crate's snapshot alone (its jobs'
-- meta then comes from the jobs table); 2, the snapshot with each distinct request
-- once and the actor's meta of every open job (sched/internal/restore.rs).
ALTER TABLE sched_snapshot ADD COLUMN format INTEGER NOT NULL DEFAULT 1;
