-- Which version of templates/starters each user's ~/templates was last brought up to
-- date with (a SHA-256 over the starters; NULL: never).
ALTER TABLE users ADD COLUMN templates_digest TEXT;
