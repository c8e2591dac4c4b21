-- Directory groups kept apart from local groups. A membership says where it comes from
-- ('local': given in the portal; 'ldap': read from the directory at login), and a
-- directory user's groups are also kept by their normalised DN, which is what
-- `auth.admin_groups` and `auth.ldap.allowed_groups` name when given as DNs. Rights
-- granted to a local group by name (administrators) never follow from a directory
-- group that happens to share the name.
-- Memberships of directory users were replaced from the directory at every login: they
-- are the directory's. Their DNs are not known until the user's next login.

ALTER TABLE memberships ADD COLUMN source TEXT NOT NULL DEFAULT 'local'
    CHECK (source IN ('local', 'ldap'));
UPDATE memberships SET source = 'ldap'
    WHERE user_id IN (SELECT id FROM users WHERE source = 'ldap');

CREATE TABLE directory_memberships (
    user_id  INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    dn       TEXT    NOT NULL,
    PRIMARY KEY (user_id, dn)
);
CREATE INDEX directory_memberships_dn ON directory_memberships (dn);

-- Rights derived from groups change: drop cached credentials everywhere.
UPDATE meta SET value = value + 1 WHERE key = 'auth_epoch';
