//! `GET /profile`: the signed-in user's account, groups, quotas and personal API
//! tokens, with the forms that create (`POST /tokens`) and revoke
//! (`POST /tokens/{id}/revoke`) a token.
//!
//! Owns: laying the account out for the page. Must not touch: the rules of tokens
//! (scopes, lifetimes, who may revoke: `auth::personal_tokens` through the accounts
//! service) or of quotas (the quotas service).

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use super::when::filters;
use super::{csrf_refused, render, CsrfForm, Nav, Section};
use crate::auth::personal_tokens::{self, TokenRequest};
use crate::auth::token::Scopes;
use crate::auth::{Principal, Scope};
use crate::http::api::rfc3339;
use crate::http::authn::PageUser;
use crate::http::{ApiError, AppState};

struct TokenRow {
    id: i64,
    name: String,
    scopes: String,
    created_at: String,
    expires_at: String,
    last_used_at: String,
}

struct NewToken {
    name: String,
    secret: String,
}

/// The account's facts as the page lists them: what, value.
type Fact = (&'static str, String);

#[derive(Template)]
#[template(path = "profile.html")]
struct ProfilePage {
    nav: Nav,
    display_name: String,
    facts: Vec<Fact>,
    groups: Vec<String>,
    tokens: Vec<TokenRow>,
    new_token: Option<NewToken>,
    token_error: Option<String>,
    token_max_days: u32,
    quotas: Vec<QuotaRow>,
}

/// One quota that applies to the user, as lines of "what: use of limit".
struct QuotaRow {
    scope: String,
    lines: Vec<(String, String)>,
}

/// The quotas of `/api/v1/me/usage`, as the profile shows them.
fn quota_rows(usage: crate::http::api::quotas::MyUsage) -> Vec<QuotaRow> {
    use crate::services::quotas::fmt_num;
    let period = match usage.period.as_str() {
        "month" => "this month",
        "rolling" => "in the window",
        _ => "this period",
    };
    usage
        .quotas
        .into_iter()
        .map(|q| {
            let l = &q.limits;
            let mut lines = Vec::new();
            if let Some(max) = l.max_gpus {
                lines.push((
                    "GPUs in use".into(),
                    format!("{} of {max}", fmt_num(q.gpus_in_use)),
                ));
            }
            for (slice, max) in &l.max_gpus_per_type {
                let used = q.slices_in_use.get(slice).copied().unwrap_or(0);
                lines.push((format!("{slice} in use"), format!("{used} of {max}")));
            }
            if let Some(max) = l.max_gpu_hours {
                lines.push((
                    format!("GPU-hours {period}"),
                    format!(
                        "{} of {} (until {})",
                        fmt_num(q.gpu_hours_used),
                        fmt_num(max),
                        q.period_end
                    ),
                ));
            }
            if let Some(max) = l.max_running_jobs {
                lines.push((
                    "Running jobs".into(),
                    format!("{} of {max}", q.running_jobs),
                ));
            }
            if let Some(max) = l.max_submitted_jobs {
                lines.push((
                    "Submitted jobs".into(),
                    format!("{} of {max}", q.submitted_jobs),
                ));
            }
            if let Some(max) = l.max_sessions {
                lines.push(("Sessions at once".into(), max.to_string()));
            }
            if let Some(max) = l.max_job_hours {
                lines.push(("Longest job".into(), format!("{} h", fmt_num(max))));
            }
            if let Some(max) = l.max_session_hours {
                lines.push(("Longest session".into(), format!("{} h", fmt_num(max))));
            }
            let scope = match q.scope.as_str() {
                "default" => "Default quota".to_string(),
                "user" => "Your quota".to_string(),
                kind => format!("{}{} {}", kind[..1].to_uppercase(), &kind[1..], q.name),
            };
            QuotaRow { scope, lines }
        })
        .collect()
}

#[derive(Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    scope_read: Option<String>,
    scope_jobs: Option<String>,
    scope_sessions: Option<String>,
    scope_tokens: Option<String>,
    scope_admin: Option<String>,
    expires_in_days: Option<String>,
}

async fn profile_page(
    state: &AppState,
    principal: &Principal,
    new_token: Option<NewToken>,
    token_error: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let (user, groups) = state
        .accounts
        .profile(principal.user_id)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    let tokens = state
        .accounts
        .tokens(principal)
        .await?
        .into_iter()
        .map(|t| TokenRow {
            id: t.id,
            name: t.name,
            scopes: Scopes::from_stored(&t.scopes).to_stored(),
            created_at: rfc3339(t.created_at),
            expires_at: t.expires_at.map(rfc3339).unwrap_or_else(|| "never".into()),
            last_used_at: t
                .last_used_at
                .map(rfc3339)
                .unwrap_or_else(|| "never".into()),
        })
        .collect();
    let quotas = quota_rows(
        state
            .quotas
            .my_usage(&principal.username, &state.jobs.owner_of(principal).await?)
            .await?,
    );
    let display_name = if user.display_name.is_empty() {
        user.username.clone()
    } else {
        user.display_name.clone()
    };
    let mut facts: Vec<Fact> = vec![("Username", user.username.clone())];
    if !user.email.is_empty() {
        facts.push(("Email", user.email.clone()));
    }
    let source = match user.source.as_str() {
        "ldap" => "the directory (LDAP)".to_string(),
        "local" => "this portal (local account)".to_string(),
        other => other.to_string(),
    };
    facts.push(("Account from", source));
    if let (Some(uid), Some(gid)) = (user.uid_number, user.gid_number) {
        facts.push(("POSIX identity", format!("uid {uid}, gid {gid}")));
    }
    if let Some(home) = &user.home {
        facts.push(("Home folder", home.clone()));
    }
    if principal.admin_account {
        facts.push(("Role", "administrator".into()));
    }
    render(
        &ProfilePage {
            nav: Nav::of(principal).at(Section::Profile),
            display_name,
            facts,
            groups,
            tokens,
            new_token,
            token_error,
            token_max_days: state.config.auth.token_max_days,
            quotas,
        },
        status,
    )
}

/// `GET /profile`.
pub async fn show(state: web::Data<AppState>, user: PageUser) -> Result<HttpResponse, ApiError> {
    user.0.require(Scope::Read)?;
    profile_page(&state, &user.0, None, None, StatusCode::OK).await
}

/// `POST /tokens`: a new token, its secret shown once on the profile page.
pub async fn create_token(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    form: web::Form<TokenForm>,
) -> Result<HttpResponse, ApiError> {
    let principal = user.0;
    let form = form.into_inner();
    if !principal.csrf_ok(Some(&form.csrf)) {
        return csrf_refused();
    }
    let scopes = [
        (form.scope_read.is_some(), Scope::Read),
        (form.scope_jobs.is_some(), Scope::Jobs),
        (form.scope_sessions.is_some(), Scope::Sessions),
        (form.scope_tokens.is_some(), Scope::Tokens),
        (form.scope_admin.is_some(), Scope::Admin),
    ]
    .into_iter()
    .filter_map(|(on, scope)| on.then_some(scope))
    .collect();
    let expires_in_days = match form.expires_in_days.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(days) => match days.parse() {
            Ok(days) => Some(days),
            Err(_) => {
                let error = "Days must be a whole number.".to_string();
                return profile_page(
                    &state,
                    &principal,
                    None,
                    Some(error),
                    StatusCode::BAD_REQUEST,
                )
                .await;
            }
        },
    };
    let request = TokenRequest {
        name: form.name,
        scopes,
        expires_in_days,
    };
    let issued = state
        .accounts
        .issue_token(&principal, &state.client_addr(&req), &request)
        .await;
    match issued {
        Ok(issued) => {
            let new = NewToken {
                name: issued.token.name,
                secret: issued.secret,
            };
            profile_page(&state, &principal, Some(new), None, StatusCode::CREATED).await
        }
        Err(personal_tokens::TokenError::Store(e)) => Err(e.into()),
        Err(e) => {
            profile_page(
                &state,
                &principal,
                None,
                Some(e.to_string()),
                StatusCode::BAD_REQUEST,
            )
            .await
        }
    }
}

/// `POST /tokens/{id}/revoke`, back to the profile's tokens.
pub async fn revoke_token(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<i64>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let principal = user.0;
    if !principal.csrf_ok(Some(&form.csrf)) {
        return csrf_refused();
    }
    state
        .accounts
        .revoke_token(&principal, &state.client_addr(&req), id.into_inner())
        .await?;
    Ok(HttpResponse::SeeOther()
        .insert_header((actix_web::http::header::LOCATION, "/profile#tokens"))
        .finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    fn page(new_token: Option<NewToken>) -> ProfilePage {
        ProfilePage {
            nav: nav().at(Section::Profile),
            display_name: "Alice <A>".into(),
            facts: vec![("Username", "alice".into())],
            groups: vec!["ml".into()],
            tokens: vec![TokenRow {
                id: 4,
                name: "laptop".into(),
                scopes: "read".into(),
                created_at: "2026-01-02T03:04:05Z".into(),
                expires_at: "never".into(),
                last_used_at: "never".into(),
            }],
            new_token,
            token_error: None,
            token_max_days: 365,
            quotas: vec![],
        }
    }

    #[test]
    fn profile_lists_tokens_with_revoke_forms_and_marks_itself_current() {
        let html = page(None).render().expect("render");
        assert!(html.contains("action=\"/tokens/4/revoke\""), "{html}");
        assert!(html.contains("id=\"token-form\""), "{html}");
        assert!(html.contains("Alice &#60;A&#62;"), "{html}");
        assert!(
            html.contains("id=\"who\" title=\"Your profile and API tokens\" aria-current=\"page\""),
            "{html}"
        );
        assert!(!html.contains("new-token-secret"), "{html}");
    }

    #[test]
    fn a_new_token_is_shown_once() {
        let html = page(Some(NewToken {
            name: "ci".into(),
            secret: "atr_secret".into(),
        }))
        .render()
        .expect("render");
        assert!(
            html.contains("id=\"new-token-secret\">atr_secret<"),
            "{html}"
        );
    }
}
