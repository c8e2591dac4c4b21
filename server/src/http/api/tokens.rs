//! `/api/v1/tokens`: the caller's personal API tokens.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};

use super::rfc3339;
use crate::auth::personal_tokens::{self, IssuedToken, TokenError, TokenRequest};
use crate::auth::token::Scopes;
use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use crate::store::ApiToken;
use crate::util::now_ms;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    name: String,
    scopes: Vec<Scope>,
    expires_in_days: Option<u32>,
}

#[derive(Serialize)]
pub struct TokenView {
    id: i64,
    name: String,
    scopes: Vec<Scope>,
    created_at: String,
    expires_at: Option<String>,
    last_used_at: Option<String>,
}

impl From<ApiToken> for TokenView {
    fn from(t: ApiToken) -> Self {
        Self {
            id: t.id,
            name: t.name,
            scopes: Scopes::from_stored(&t.scopes).iter().collect(),
            created_at: rfc3339(t.created_at),
            expires_at: t.expires_at.map(rfc3339),
            last_used_at: t.last_used_at.map(rfc3339),
        }
    }
}

#[derive(Serialize)]
struct Created {
    #[serde(flatten)]
    token: TokenView,
    /// The secret, shown this once.
    secret: String,
}

impl From<TokenError> for ApiError {
    fn from(e: TokenError) -> Self {
        match e {
            TokenError::Store(e) => e.into(),
            TokenError::ScopeNotHeld(_) | TokenError::CannotMint => {
                ApiError::forbidden(e.to_string())
            }
            other => ApiError::bad_request(other.to_string()),
        }
    }
}

/// Issue a token for the caller and audit it. Shared by the API and the tokens form.
pub async fn issue_audited(
    state: &AppState,
    req: &HttpRequest,
    caller: &Principal,
    request: &TokenRequest,
) -> Result<IssuedToken, TokenError> {
    let issued = personal_tokens::issue(
        &state.store,
        caller,
        request,
        state.config.auth.token_max_days,
    )
    .await?;
    let detail = serde_json::json!({
        "token_id": issued.token.id,
        "name": issued.token.name,
        "scopes": issued.token.scopes,
        "expires_at": issued.token.expires_at,
    });
    if let Err(e) = state
        .record_audit(
            req,
            &caller.username,
            "token.create",
            &caller.username,
            detail,
        )
        .await
    {
        tracing::error!(error = %e, "cannot audit token creation");
    }
    Ok(issued)
}

/// Revoke one of the caller's tokens and audit it. Shared by the API and the page.
pub async fn revoke_audited(
    state: &AppState,
    req: &HttpRequest,
    caller: &Principal,
    token_id: i64,
) -> Result<(), ApiError> {
    personal_tokens::may_revoke(caller, token_id)?;
    state.auth.revoke_token(caller.user_id, token_id).await?;
    let detail = serde_json::json!({ "token_id": token_id });
    state
        .record_audit(
            req,
            &caller.username,
            "token.revoke",
            &caller.username,
            detail,
        )
        .await
}

pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let tokens = state
        .store
        .list_api_tokens(caller.user_id, now_ms())
        .await?;
    let views: Vec<TokenView> = tokens.into_iter().map(TokenView::from).collect();
    Ok(HttpResponse::Ok().json(views))
}

pub async fn create(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    body: web::Json<CreateToken>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let request = TokenRequest {
        name: body.name,
        scopes: body.scopes,
        expires_in_days: body.expires_in_days,
    };
    let issued = issue_audited(&state, &req, &caller, &request).await?;
    Ok(HttpResponse::Created().json(Created {
        token: issued.token.into(),
        secret: issued.secret,
    }))
}

pub async fn revoke(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id: i64 = id
        .parse()
        .map_err(|_| ApiError::bad_request("token id must be an integer"))?;
    revoke_audited(&state, &req, &caller, id).await?;
    Ok(HttpResponse::NoContent().finish())
}
