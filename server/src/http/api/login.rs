//! `POST /api/v1/login`: password login for scripts and single-page clients. Sets the
//! same session cookie as the form and answers with the user. Only JSON bodies are
//! accepted, which a cross-site form cannot send.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};

use crate::http::authn::session_cookie;
use crate::http::signin::sign_in;
use crate::http::{ApiError, AppState};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    username: String,
    password: String,
}

#[derive(Serialize)]
struct LoggedIn {
    id: i64,
    username: String,
    display_name: String,
    source: String,
    uid_number: Option<i64>,
    gid_number: Option<i64>,
    home: Option<String>,
    groups: Vec<String>,
    admin: bool,
    /// The CSRF token to send as `X-CSRF-Token` with state-changing calls.
    csrf_token: String,
    expires_at: i64,
}

pub async fn post(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<Credentials>,
) -> Result<HttpResponse, ApiError> {
    let (user, login) = sign_in(&state, &req, &body.username, &body.password).await?;
    let groups = state.accounts.groups_of(user.id).await?;
    let admin = state.auth.is_admin(user.id).await?;
    Ok(HttpResponse::Ok()
        .cookie(session_cookie(&login.token, &state))
        .json(LoggedIn {
            id: user.id,
            username: user.username,
            display_name: user.display_name,
            source: user.source,
            uid_number: user.uid_number,
            gid_number: user.gid_number,
            home: user.home,
            groups,
            admin,
            csrf_token: login.claims.csrf,
            expires_at: login.claims.exp,
        }))
}
