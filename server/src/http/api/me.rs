//! `GET /api/v1/me`: the caller.

use actix_web::{web, HttpResponse};
use serde::Serialize;

use crate::auth::{Credential, Principal, Scope};
use crate::http::{ApiError, AppState};

#[derive(Serialize)]
struct Me<'a> {
    id: i64,
    username: &'a str,
    admin: bool,
    /// `session` (browser) or `token`.
    auth: &'static str,
    scopes: Vec<Scope>,
}

pub async fn get(caller: Principal, _state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(Me {
        id: caller.user_id,
        username: &caller.username,
        admin: caller.admin_account,
        auth: match caller.credential {
            Credential::Session { .. } => "session",
            Credential::Token { .. } => "token",
        },
        scopes: caller.scopes().iter().collect(),
    }))
}
