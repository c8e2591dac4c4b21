-- The folder a terminal session opens in ("Open a terminal here" on the Files page),
-- confined to the user's home and project spaces when it was asked for. NULL: the
-- home.
ALTER TABLE sessions ADD COLUMN folder TEXT;
