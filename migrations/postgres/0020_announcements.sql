-- An administrator's message to everyone (maintenance next Tuesday), shown on the
-- dashboard and atop every page between `starts_at` and `ends_at` (ms since the
-- epoch). server/src/services/announcements.rs.
CREATE TABLE announcements (
    id          BIGSERIAL PRIMARY KEY,
    message     TEXT    NOT NULL,
    severity    TEXT    NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    starts_at   BIGINT  NOT NULL,
    ends_at     BIGINT  NOT NULL,
    created_by  TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL
);
CREATE INDEX announcements_ends ON announcements (ends_at);
