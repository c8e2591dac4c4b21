//! The administrators' pages under `/admin`: an overview, users, groups, quotas,
//! everyone's jobs and sessions, the jobs that held GPUs idle, nodes, and the audit
//! log.
//!
//! Owns: laying out what the services return, and the forms that call them. Must not touch: the rules (who may do what, what a valid quota or reason
//! is, what is audited); the services (`crate::services`) decide those, and these
//! pages call the same functions. Anyone signed in who is not an administrator gets a
//! 403 page on every route here; no one signed in goes to the login page.

mod announcements;
mod audit;
mod groups;
mod idle_gpus;
mod jobs;
mod nodes;
mod overview;
mod quotas;
mod sessions;
mod user_detail;
mod users;

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::error::InternalError;
use actix_web::http::{header, StatusCode};
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};

use serde::de::DeserializeOwned;

use super::{csrf_refused, render, CsrfForm, MessagePage};
use crate::auth::{Principal, Scope};
use crate::http::authn::PageUser;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/admin", web::get().to(overview::show))
        .route("/admin/users", web::get().to(users::show))
        .route("/admin/users/{name}", web::get().to(user_detail::show))
        .route("/admin/users/{name}/{action}", web::post().to(users::act))
        .route("/admin/groups", web::get().to(groups::show))
        .route("/admin/quotas", web::get().to(quotas::show))
        .route("/admin/quotas", web::post().to(quotas::create))
        .route("/admin/quotas/{id}", web::get().to(quotas::edit))
        .route("/admin/quotas/{id}", web::post().to(quotas::update))
        .route("/admin/quotas/{id}/delete", web::post().to(quotas::delete))
        .route("/admin/jobs", web::get().to(jobs::show))
        .route("/admin/jobs/rows", web::get().to(jobs::rows))
        .route("/admin/jobs/{id}/cancel", web::post().to(jobs::cancel))
        .route("/admin/sessions", web::get().to(sessions::show))
        .route("/admin/idle-gpus", web::get().to(idle_gpus::show))
        .route("/admin/sessions/{id}/stop", web::post().to(sessions::stop))
        .route("/admin/nodes", web::get().to(nodes::show))
        .route("/admin/nodes/{name}/{action}", web::post().to(nodes::act))
        .route("/admin/announcements", web::get().to(announcements::show))
        .route(
            "/admin/announcements",
            web::post().to(announcements::create),
        )
        .route(
            "/admin/announcements/{id}/delete",
            web::post().to(announcements::delete),
        )
        .route("/admin/audit", web::get().to(audit::show));
}

/// A signed-in administrator (with the admin scope when signed in by token).
#[derive(Debug, Clone)]
pub struct AdminUser(pub Principal);

impl FromRequest for AdminUser {
    type Error = actix_web::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let user = PageUser::from_request(req, payload);
        Box::pin(async move {
            let PageUser(principal) = user.await?;
            if principal.has_scope(Scope::Admin) {
                return Ok(AdminUser(principal));
            }
            let page = render(
                &MessagePage {
                    title: "Administrators only",
                    message: "This page is for the portal's administrators.",
                },
                StatusCode::FORBIDDEN,
            )?;
            Err(InternalError::from_response("administrators only", page).into())
        })
    }
}

/// A form that carries the login session's CSRF token.
pub trait CsrfField {
    fn csrf(&self) -> &str;
}

impl CsrfField for CsrfForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// An administrator's form post, checked in this order: an administrator (else as
/// [`AdminUser`]), a readable form (else 400), its CSRF token (else the "form
/// expired" page).
#[derive(Debug)]
pub struct AdminPost<T> {
    pub admin: Principal,
    pub form: T,
}

impl<T: DeserializeOwned + CsrfField + 'static> FromRequest for AdminPost<T> {
    type Error = actix_web::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let admin = AdminUser::from_request(req, payload);
        let form = web::Form::<T>::from_request(req, payload);
        Box::pin(async move {
            let AdminUser(admin) = admin.await?;
            let web::Form(form) = form.await?;
            if !admin.csrf_ok(Some(form.csrf())) {
                return Err(
                    InternalError::from_response("invalid CSRF token", csrf_refused()?).into(),
                );
            }
            Ok(AdminPost { admin, form })
        })
    }
}

/// After a form's change: back to the page at `to`.
fn see_other(to: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, to.to_string()))
        .finish()
}
