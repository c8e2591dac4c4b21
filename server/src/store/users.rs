//! Users, groups and memberships, and the POSIX identity jobs run as.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;
use std::path::PathBuf;

use sqlx::any::AnyRow;
use sqlx::Row;

use super::{flag, opt_i64, Result, Store, StoreError};

/// A user row: an account from the local table or from LDAP, with its POSIX identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub username: String,
    pub display_name: String,
    pub email: String,
    pub source: String,
    pub password_hash: Option<String>,
    pub uid_number: Option<i64>,
    pub gid_number: Option<i64>,
    pub home: Option<String>,
    pub login_shell: Option<String>,
    pub disabled: bool,
    pub created_at: i64,
    pub last_login_at: Option<i64>,
}

/// A group row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub gid_number: Option<i64>,
    /// `local` or `ldap`.
    pub source: String,
}

#[derive(Debug, Clone, Default)]
pub struct NewUser {
    pub username: String,
    pub display_name: String,
    pub email: String,
    pub password_hash: Option<String>,
    pub uid_number: Option<i64>,
    pub gid_number: Option<i64>,
    pub home: Option<String>,
}

pub use crate::domain::identity::PosixIdentity;

const USER_COLUMNS: &str = "id, username, display_name, email, source, password_hash, \
    uid_number, gid_number, home, login_shell, disabled, created_at, last_login_at";

/// What a change of credentials revoked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Revoked {
    /// Browser login sessions ended.
    pub sessions: u64,
    /// API tokens revoked.
    pub tokens: u64,
}

impl Revoked {
    /// From the rows changed by [`revoke_everything`]'s statements.
    fn from_rows(rows: &[u64]) -> Self {
        Revoked {
            sessions: rows.first().copied().unwrap_or(0),
            tokens: rows.get(1).copied().unwrap_or(0),
        }
    }

    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({ "sessions_ended": self.sessions, "tokens_revoked": self.tokens })
    }
}

type Statement<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// End every live browser login of the user and revoke every live API token.
fn revoke_everything<'q>(user_id: i64, now: i64) -> Vec<Statement<'q>> {
    vec![
        sqlx::query(
            "UPDATE login_sessions SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(user_id),
        sqlx::query(
            "UPDATE api_tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(user_id),
    ]
}

fn user_from_row(row: &AnyRow) -> Result<User> {
    Ok(User {
        id: row.try_get("id")?,
        username: row.try_get("username")?,
        display_name: row.try_get("display_name")?,
        email: row.try_get("email")?,
        source: row.try_get("source")?,
        password_hash: row.try_get("password_hash")?,
        uid_number: opt_i64(row, "uid_number")?,
        gid_number: opt_i64(row, "gid_number")?,
        home: row.try_get("home")?,
        login_shell: row.try_get("login_shell")?,
        disabled: flag(row, "disabled")?,
        created_at: row.try_get("created_at")?,
        last_login_at: opt_i64(row, "last_login_at")?,
    })
}

/// Insert `user` as a local account with `uid` and `gid` (the callers decide them);
/// the row as stored. `Conflict` when the name is taken.
async fn insert_local_user(
    conn: &mut sqlx::AnyConnection,
    user: &NewUser,
    uid: Option<i64>,
    gid: Option<i64>,
    now: i64,
) -> Result<User> {
    let row = sqlx::query(&format!(
        "INSERT INTO users (username, display_name, email, source, password_hash, \
         uid_number, gid_number, home, created_at, updated_at) \
         VALUES ($1, $2, $3, 'local', $4, $5, $6, $7, $8, $8) RETURNING {USER_COLUMNS}"
    ))
    .bind(&user.username)
    .bind(&user.display_name)
    .bind(&user.email)
    .bind(&user.password_hash)
    .bind(uid)
    .bind(gid)
    .bind(&user.home)
    .bind(now)
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| StoreError::conflict_on_unique(e, format!("user {}", user.username)))?;
    user_from_row(&row)
}

impl Store {
    /// Create a local account.
    #[tracing::instrument(skip_all, fields(username = %user.username), err)]
    pub async fn create_local_user(&self, user: &NewUser, now: i64) -> Result<User> {
        let mut conn = self.pool.acquire().await?;
        insert_local_user(&mut conn, user, user.uid_number, user.gid_number, now).await
    }

    /// Create a local account with the lowest free uid of `range`: a number that no
    /// user holds as uid or gid, no group holds as gid, and `system_knows` (the
    /// system's user and group databases) does not claim. Its gid is the same number
    /// (a user private group) unless `user.gid_number` is set; `user.uid_number` is
    /// ignored. Allocation and insert are one transaction that first takes a lock
    /// row, so concurrent calls, from any process, get different uids. `NoFreeUid`
    /// when the range is full.
    #[tracing::instrument(skip_all, fields(username = %user.username), err)]
    pub async fn create_local_user_allocating_uid(
        &self,
        user: &NewUser,
        range: RangeInclusive<u32>,
        system_knows: impl Fn(u32) -> bool + Send + 'static,
        now: i64,
    ) -> Result<User> {
        let (min, max) = (*range.start(), *range.end());
        let mut tx = self.write().await?;
        // Writing first serializes allocators: SQLite takes its write lock, and
        // PostgreSQL locks the row until commit, so each one sees the uids the
        // previous one committed.
        sqlx::query(
            "INSERT INTO meta (key, value) VALUES ('uid_allocations', 1) \
             ON CONFLICT (key) DO UPDATE SET value = meta.value + 1",
        )
        .execute(&mut *tx)
        .await?;
        let rows = sqlx::query(
            "SELECT uid_number FROM users WHERE uid_number BETWEEN $1 AND $2 \
             UNION SELECT gid_number FROM users WHERE gid_number BETWEEN $1 AND $2 \
             UNION SELECT gid_number FROM groups WHERE gid_number BETWEEN $1 AND $2",
        )
        .bind(i64::from(min))
        .bind(i64::from(max))
        .fetch_all(&mut *tx)
        .await?;
        let held: BTreeSet<i64> = rows
            .iter()
            .map(|r| r.try_get::<i64, _>(0))
            .collect::<std::result::Result<_, _>>()?;
        // The system's databases may be remote (NSS over LDAP): ask off the runtime.
        let free = tokio::task::spawn_blocking(move || {
            range
                .into_iter()
                .find(|n| !held.contains(&i64::from(*n)) && !system_knows(*n))
        })
        .await
        .map_err(|e| StoreError::Database(sqlx::Error::Protocol(e.to_string())))?;
        let uid = free.ok_or(StoreError::NoFreeUid { min, max })?;
        let gid = user.gid_number.unwrap_or(i64::from(uid));
        let created =
            insert_local_user(&mut tx, user, Some(i64::from(uid)), Some(gid), now).await?;
        tx.commit().await?;
        Ok(created)
    }

    /// The identity `username`'s jobs run as. `None` when the user does not exist
    /// or its uid, gid or home is unknown, and for uid or gid 0: no job runs as
    /// root.
    #[tracing::instrument(skip_all, fields(username = %username), err)]
    pub async fn posix_identity(&self, username: &str) -> Result<Option<PosixIdentity>> {
        let Some(row) =
            sqlx::query("SELECT id, uid_number, gid_number, home FROM users WHERE username = $1")
                .bind(username)
                .fetch_optional(&self.pool)
                .await?
        else {
            return Ok(None);
        };
        let id: i64 = row.try_get("id")?;
        let positive = |n: Option<i64>| n.and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0);
        let uid_number = opt_i64(&row, "uid_number")?;
        let gid_number = opt_i64(&row, "gid_number")?;
        let home: Option<String> = row.try_get("home")?;
        let (Some(uid), Some(gid), Some(home)) = (
            positive(uid_number),
            positive(gid_number),
            home.filter(|h| !h.is_empty()),
        ) else {
            if uid_number.is_some() {
                tracing::warn!(
                    ?uid_number,
                    ?gid_number,
                    "{username} has no usable POSIX identity (uid and gid above 0 and a home)"
                );
            }
            return Ok(None);
        };
        let rows = sqlx::query(
            "SELECT g.name, g.gid_number FROM groups g JOIN memberships m ON m.group_id = g.id \
             WHERE m.user_id = $1 ORDER BY g.name",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        let groups = rows
            .iter()
            .map(|r| {
                let name: String = r.try_get(0)?;
                let gid = opt_i64(r, "gid_number")?.and_then(|g| u32::try_from(g).ok());
                Ok((name, gid))
            })
            .collect::<Result<_>>()?;
        Ok(Some(PosixIdentity {
            uid,
            gid,
            home: PathBuf::from(home),
            groups,
        }))
    }

    /// Insert or refresh a directory (LDAP) user with its POSIX identity. `Conflict`
    /// when a local account holds the name.
    #[tracing::instrument(skip_all, fields(username = %user.username), err)]
    pub async fn upsert_directory_user(
        &self,
        user: &NewUser,
        login_shell: Option<&str>,
        now: i64,
    ) -> Result<User> {
        let row = sqlx::query(&format!(
            "INSERT INTO users (username, display_name, email, source, uid_number, gid_number, \
             home, login_shell, created_at, updated_at) \
             VALUES ($1, $2, $3, 'ldap', $4, $5, $6, $7, $8, $8) \
             ON CONFLICT (username) DO UPDATE SET display_name = excluded.display_name, \
             email = excluded.email, uid_number = excluded.uid_number, \
             gid_number = excluded.gid_number, home = excluded.home, \
             login_shell = excluded.login_shell, updated_at = excluded.updated_at \
             WHERE users.source = 'ldap' RETURNING {USER_COLUMNS}"
        ))
        .bind(&user.username)
        .bind(&user.display_name)
        .bind(&user.email)
        .bind(user.uid_number)
        .bind(user.gid_number)
        .bind(&user.home)
        .bind(login_shell)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => user_from_row(&row),
            None => Err(StoreError::Conflict(format!(
                "local account {}",
                user.username
            ))),
        }
    }

    pub async fn user_by_name(&self, username: &str) -> Result<Option<User>> {
        let row = sqlx::query(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE username = $1"
        ))
        .bind(username)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    /// The one user with POSIX uid `uid` (`None`: none, or more than one).
    pub async fn username_of_uid(&self, uid: u32) -> Result<Option<String>> {
        let rows = sqlx::query("SELECT username FROM users WHERE uid_number = $1 LIMIT 2")
            .bind(i64::from(uid))
            .fetch_all(&self.pool)
            .await?;
        match rows.as_slice() {
            [row] => Ok(Some(row.try_get("username")?)),
            _ => Ok(None),
        }
    }

    pub async fn user_by_id(&self, id: i64) -> Result<Option<User>> {
        let row = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    pub async fn list_users(&self) -> Result<Vec<User>> {
        let rows = sqlx::query(&format!(
            "SELECT {USER_COLUMNS} FROM users ORDER BY username"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(user_from_row).collect()
    }

    /// A page of the accounts by name: at most `limit` from the `offset`th, and how many
    /// accounts there are (the unique index on `username` keeps it ordered).
    pub async fn list_users_page(&self, offset: i64, limit: i64) -> Result<(Vec<User>, i64)> {
        let rows = sqlx::query(&format!(
            "SELECT {USER_COLUMNS} FROM users ORDER BY username LIMIT $1 OFFSET $2"
        ))
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        let total: i64 = sqlx::query("SELECT COUNT(*) FROM users")
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        let users = rows.iter().map(user_from_row).collect::<Result<Vec<_>>>()?;
        Ok((users, total))
    }

    /// A page of the accounts whose name or display name contains `text` (any
    /// case), by name, and how many match.
    pub async fn search_users_page(
        &self,
        text: &str,
        offset: i64,
        limit: i64,
    ) -> Result<(Vec<User>, i64)> {
        let escaped: String = text
            .to_lowercase()
            .chars()
            .flat_map(|c| match c {
                '\\' | '%' | '_' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        let pattern = format!("%{escaped}%");
        let matching = "LOWER(username) LIKE $1 ESCAPE '\\' \
                        OR LOWER(display_name) LIKE $1 ESCAPE '\\'";
        let rows = sqlx::query(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE {matching} \
             ORDER BY username LIMIT $2 OFFSET $3"
        ))
        .bind(&pattern)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        let total: i64 = sqlx::query(&format!("SELECT COUNT(*) FROM users WHERE {matching}"))
            .bind(&pattern)
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        let users = rows.iter().map(user_from_row).collect::<Result<Vec<_>>>()?;
        Ok((users, total))
    }

    /// How many accounts there are, and how many of them are disabled.
    pub async fn count_users(&self) -> Result<(i64, i64)> {
        let row = sqlx::query(
            "SELECT COUNT(*), (SELECT COUNT(*) FROM users WHERE disabled = 1) FROM users",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok((row.try_get(0)?, row.try_get(1)?))
    }

    /// Set a local account's password. A new password ends every browser login of the
    /// account and revokes its API tokens: whoever held a credential obtained with the
    /// old password (the reason to change it) keeps nothing.
    #[tracing::instrument(skip_all, fields(user_id), err)]
    pub async fn set_password_hash(&self, user_id: i64, hash: &str, now: i64) -> Result<Revoked> {
        let update = sqlx::query(
            "UPDATE users SET password_hash = $1, updated_at = $2 WHERE id = $3 AND source = 'local'",
        )
        .bind(hash)
        .bind(now)
        .bind(user_id);
        let changed = self
            .change_credentials(update, revoke_everything(user_id, now))
            .await?;
        Ok(Revoked::from_rows(&changed))
    }

    /// Disable or enable an account. Disabling refuses its sessions and tokens at once
    /// and revokes them for good: enabling the account again does not bring them back.
    #[tracing::instrument(skip_all, fields(user_id, disabled), err)]
    pub async fn set_disabled(&self, user_id: i64, disabled: bool, now: i64) -> Result<Revoked> {
        let update = sqlx::query("UPDATE users SET disabled = $1, updated_at = $2 WHERE id = $3")
            .bind(i64::from(disabled))
            .bind(now)
            .bind(user_id);
        let then = if disabled {
            revoke_everything(user_id, now)
        } else {
            Vec::new()
        };
        let changed = self.change_credentials(update, then).await?;
        Ok(Revoked::from_rows(&changed))
    }

    /// The starters digest the user's `~/templates` was last synced with.
    pub async fn templates_digest(&self, user_id: i64) -> Result<Option<String>> {
        let row = sqlx::query("SELECT templates_digest FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => row.try_get(0)?,
            None => None,
        })
    }

    pub async fn set_templates_digest(&self, user_id: i64, digest: &str) -> Result<()> {
        sqlx::query("UPDATE users SET templates_digest = $1 WHERE id = $2")
            .bind(digest)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn record_login(&self, user_id: i64, now: i64) -> Result<()> {
        sqlx::query("UPDATE users SET last_login_at = $1 WHERE id = $2")
            .bind(now)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Create the group if needed and return its id.
    pub async fn ensure_group(&self, name: &str, source: &str, now: i64) -> Result<i64> {
        sqlx::query(
            "INSERT INTO groups (name, source, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(source)
        .bind(now)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query("SELECT id FROM groups WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get(0)?)
    }

    /// Set (or clear) a group's POSIX gid. `NotFound` for an unknown group.
    #[tracing::instrument(skip_all, fields(group_id, ?gid), err)]
    pub async fn set_group_gid(&self, group_id: i64, gid: Option<u32>) -> Result<()> {
        let done = sqlx::query("UPDATE groups SET gid_number = $1 WHERE id = $2")
            .bind(gid.map(i64::from))
            .bind(group_id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    pub async fn add_member(&self, user_id: i64, group_id: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO memberships (user_id, group_id, source) VALUES ($1, $2, 'local') \
             ON CONFLICT (user_id, group_id) DO UPDATE SET source = 'local'",
        )
        .bind(user_id)
        .bind(group_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Names of the user's groups, sorted.
    pub async fn groups_of(&self, user_id: i64) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT g.name FROM groups g JOIN memberships m ON m.group_id = g.id \
             WHERE m.user_id = $1 ORDER BY g.name",
        )
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(StoreError::from))
            .collect()
    }

    /// Every group, by name.
    pub async fn list_groups(&self) -> Result<Vec<Group>> {
        let rows = sqlx::query("SELECT name, gid_number, source FROM groups ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Group {
                    name: row.try_get("name")?,
                    gid_number: opt_i64(row, "gid_number")?,
                    source: row.try_get("source")?,
                })
            })
            .collect()
    }

    /// Every membership as `(group, user)` names, sorted by group then user.
    pub async fn memberships(&self) -> Result<Vec<(String, String)>> {
        let rows = sqlx::query(
            "SELECT g.name AS group_name, u.username FROM memberships m \
             JOIN groups g ON g.id = m.group_id JOIN users u ON u.id = m.user_id \
             ORDER BY g.name, u.username",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("group_name")?, row.try_get("username")?)))
            .collect()
    }

    /// Whether any enabled user was given one of the local groups `groups` in the portal.
    pub async fn any_member_of(&self, groups: &[String]) -> Result<bool> {
        Ok(!self.members_of(groups, &[], false).await?.is_empty())
    }
}
