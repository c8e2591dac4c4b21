//! Personal API tokens, stored by the SHA-256 of their secret.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::{flag, opt_i64, Result, Store, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    pub id: i64,
    pub user_id: i64,
    pub name: String,
    pub scopes: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct NewApiToken<'a> {
    pub user_id: i64,
    pub name: &'a str,
    pub token_hash: &'a str,
    pub scopes: &'a str,
    pub expires_at: Option<i64>,
}

/// A live token together with the state of its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    pub token: ApiToken,
    pub username: String,
    pub disabled: bool,
}

const TOKEN_COLUMNS: &str =
    "t.id, t.user_id, t.name, t.scopes, t.created_at, t.expires_at, t.last_used_at";
const RETURNED_COLUMNS: &str = "id, user_id, name, scopes, created_at, expires_at, last_used_at";

fn token_from_row(row: &AnyRow) -> Result<ApiToken> {
    Ok(ApiToken {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        name: row.try_get("name")?,
        scopes: row.try_get("scopes")?,
        created_at: row.try_get("created_at")?,
        expires_at: opt_i64(row, "expires_at")?,
        last_used_at: opt_i64(row, "last_used_at")?,
    })
}

impl Store {
    #[tracing::instrument(skip_all, fields(user_id = token.user_id, name = token.name), err)]
    pub async fn create_api_token(&self, token: &NewApiToken<'_>, now: i64) -> Result<ApiToken> {
        let row = sqlx::query(&format!(
            "INSERT INTO api_tokens (user_id, name, token_hash, scopes, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING {RETURNED_COLUMNS}"
        ))
        .bind(token.user_id)
        .bind(token.name)
        .bind(token.token_hash)
        .bind(token.scopes)
        .bind(now)
        .bind(token.expires_at)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| StoreError::conflict_on_unique(e, format!("token {:?}", token.name)))?;
        token_from_row(&row)
    }

    /// The live (not revoked, not expired) token with this hash, and its owner.
    /// Records the use.
    pub async fn use_api_token(&self, token_hash: &str, now: i64) -> Result<Option<TokenOwner>> {
        let row = sqlx::query(&format!(
            "SELECT {TOKEN_COLUMNS}, u.username, u.disabled FROM api_tokens t \
             JOIN users u ON u.id = t.user_id \
             WHERE t.token_hash = $1 AND t.revoked_at IS NULL \
             AND (t.expires_at IS NULL OR t.expires_at > $2)"
        ))
        .bind(token_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let owner = TokenOwner {
            token: token_from_row(&row)?,
            username: row.try_get("username")?,
            disabled: flag(&row, "disabled")?,
        };
        sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE id = $2")
            .bind(now)
            .bind(owner.token.id)
            .execute(&self.pool)
            .await?;
        Ok(Some(owner))
    }

    /// The user's live tokens, newest first.
    pub async fn list_api_tokens(&self, user_id: i64, now: i64) -> Result<Vec<ApiToken>> {
        let rows = sqlx::query(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens t WHERE t.user_id = $1 \
             AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > $2) \
             ORDER BY t.created_at DESC, t.id DESC"
        ))
        .bind(user_id)
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(token_from_row).collect()
    }

    /// Revoke one of the user's tokens. `NotFound` when it is not theirs or not live.
    #[tracing::instrument(skip_all, fields(user_id, token_id), err)]
    pub async fn revoke_api_token(&self, user_id: i64, token_id: i64, now: i64) -> Result<()> {
        let revoke = sqlx::query(
            "UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND user_id = $3 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(token_id)
        .bind(user_id);
        self.change_credentials(revoke, Vec::new()).await?;
        Ok(())
    }
}
