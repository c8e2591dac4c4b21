-- Sessions run apps defined in the configuration ([[apps]], server/src/config/apps.rs):
-- `kind` holds an app's id, no longer only notebook, terminal or tensorboard (rows
-- that hold those keep them: they are the built-in apps' ids).
-- `events`: a session's event log (queued, placed on a node, its server started, ready,
-- how it ended), as JSON [{at, message}], written when the session ends so that its
-- progress page shows it afterwards (server/src/sessions/watch.rs). NULL: only the
-- row's times.

ALTER TABLE sessions DROP CONSTRAINT sessions_kind_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_kind_check CHECK (length(kind) BETWEEN 1 AND 64);
ALTER TABLE sessions ADD COLUMN events TEXT;
