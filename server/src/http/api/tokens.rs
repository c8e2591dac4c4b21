//! `/api/v1/tokens`: the caller's personal API tokens.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};

use super::rfc3339;
use crate::auth::personal_tokens::TokenRequest;
use crate::auth::token::Scopes;
use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use crate::services::records::ApiToken;

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

pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let tokens = state.accounts.tokens(&caller).await?;
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
    let issued = state
        .accounts
        .issue_token(&caller, &state.client_addr(&req), &request)
        .await?;
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
        .map_err(|_| ApiError::invalid("id", "token id must be an integer"))?;
    state
        .accounts
        .revoke_token(&caller, &state.client_addr(&req), id)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
