//! Where a user's group memberships come from, as rights are decided on them:
//! memberships given in the portal (`local`) and those read from the directory at
//! login (`ldap`), the directory's kept by their normalised DN as well.

use std::collections::BTreeSet;

use sqlx::Row;

use super::{Result, Store};

/// A user's memberships by kind, each sorted.
#[derive(Debug, Default)]
struct MembershipRefs {
    /// Names of the local groups given in the portal.
    local: Vec<String>,
    /// Names of the groups the directory put the user in.
    ldap: Vec<String>,
    /// Normalised DNs of the directory's groups.
    dns: Vec<String>,
}

impl Store {
    /// Make the user's directory memberships exactly `groups`, each a group's name and
    /// its normalised DN. Memberships given in the portal (`local`) are kept; a group of
    /// the same name is shared for quotas and partitions, but the membership stays the
    /// directory's, and rights given to local groups by name do not follow from it.
    #[tracing::instrument(skip_all, fields(user_id, count = groups.len()), err)]
    pub async fn set_directory_memberships(
        &self,
        user_id: i64,
        groups: &[(String, String)],
        now: i64,
    ) -> Result<()> {
        let mut names: Vec<String> = groups.iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        names.dedup();
        let mut dns: Vec<String> = groups.iter().map(|(_, dn)| dn.clone()).collect();
        dns.sort();
        dns.dedup();
        let current = self.membership_refs(user_id).await?;
        if current.ldap == names && current.dns == dns {
            return Ok(());
        }
        let mut ids = Vec::with_capacity(names.len());
        for group in &names {
            ids.push(self.ensure_group(group, "ldap", now).await?);
        }
        let mut tx = self.write().await?;
        sqlx::query("DELETE FROM memberships WHERE user_id = $1 AND source = 'ldap'")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        for id in ids {
            sqlx::query(
                "INSERT INTO memberships (user_id, group_id, source) VALUES ($1, $2, 'ldap') \
                 ON CONFLICT (user_id, group_id) DO NOTHING",
            )
            .bind(user_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("DELETE FROM directory_memberships WHERE user_id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        for dn in &dns {
            sqlx::query("INSERT INTO directory_memberships (user_id, dn) VALUES ($1, $2)")
                .bind(user_id)
                .bind(dn)
                .execute(&mut *tx)
                .await?;
        }
        // Rights derived from groups (admin) change: drop cached credentials.
        Store::bump_auth_epoch(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The user's groups as rights are decided on them: the names of the local groups
    /// given in the portal, and the normalised DNs of the directory's groups; both
    /// sorted.
    pub async fn group_refs_of(&self, user_id: i64) -> Result<(Vec<String>, Vec<String>)> {
        let refs = self.membership_refs(user_id).await?;
        Ok((refs.local, refs.dns))
    }

    /// Every kind of membership of the user, in one query (a login reads them).
    async fn membership_refs(&self, user_id: i64) -> Result<MembershipRefs> {
        let rows = sqlx::query(
            "SELECT m.source AS kind, g.name AS value FROM groups g \
             JOIN memberships m ON m.group_id = g.id WHERE m.user_id = $1 \
             UNION ALL SELECT 'dn' AS kind, dn AS value FROM directory_memberships \
             WHERE user_id = $1 ORDER BY kind, value",
        )
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        let mut refs = MembershipRefs::default();
        for row in &rows {
            let value: String = row.try_get("value")?;
            match row.try_get::<String, _>("kind")?.as_str() {
                "local" => refs.local.push(value),
                "ldap" => refs.ldap.push(value),
                "dn" => refs.dns.push(value),
                _ => {}
            }
        }
        Ok(refs)
    }

    /// Usernames of the members of the local groups `local` (memberships given in the
    /// portal) or of the directory groups `directory` (normalised DNs); enabled
    /// accounts only unless `with_disabled`.
    pub async fn members_of(
        &self,
        local: &[String],
        directory: &[String],
        with_disabled: bool,
    ) -> Result<BTreeSet<String>> {
        let mut found = BTreeSet::new();
        for group in local {
            let rows = sqlx::query(
                "SELECT u.username FROM memberships m JOIN groups g ON g.id = m.group_id \
                 JOIN users u ON u.id = m.user_id \
                 WHERE g.name = $1 AND m.source = 'local' AND (u.disabled = 0 OR $2 = 1)",
            )
            .bind(group)
            .bind(i64::from(with_disabled))
            .fetch_all(&self.pool)
            .await?;
            for row in rows {
                found.insert(row.try_get::<String, _>(0)?);
            }
        }
        for dn in directory {
            let rows = sqlx::query(
                "SELECT u.username FROM directory_memberships d JOIN users u ON u.id = d.user_id \
                 WHERE d.dn = $1 AND (u.disabled = 0 OR $2 = 1)",
            )
            .bind(dn)
            .bind(i64::from(with_disabled))
            .fetch_all(&self.pool)
            .await?;
            for row in rows {
                found.insert(row.try_get::<String, _>(0)?);
            }
        }
        Ok(found)
    }
}
