-- Accounting (issue 7): the jobs that ran during a range are those that ended after its
-- start (or still run) and started before its end. With start_time beside end_time
-- in the index, the second test is answered from the index, without reading the row of
-- every job that ended later. It serves every query jobs_end served.
CREATE INDEX jobs_end_start ON jobs (end_time, start_time);
DROP INDEX jobs_end;
