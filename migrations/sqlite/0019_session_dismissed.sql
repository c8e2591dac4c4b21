-- An ended session its owner dismissed from the dashboard ("Dismiss" on its card), and
-- one whose start was refused (the form said why): no longer listed there; the row
-- stays for its history. NULL: listed.
ALTER TABLE sessions ADD COLUMN dismissed_at INTEGER;
