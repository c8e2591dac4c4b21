//! `GET /admin/announcements`: the announcements not over yet and a form to make one
//! (message, severity, from, until); `POST /admin/announcements` announces,
//! `POST /admin/announcements/{id}/delete` withdraws. All through the announcements
//! service, audited.

use crate::http::pages::not_found_page;
use crate::http::pages::PageError;
use crate::services::ServiceError;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use super::{see_other, AdminPost, AdminUser, CsrfField};
use crate::auth::Principal;
use crate::http::pages::when::filters;
use crate::http::pages::{render, CsrfForm, Nav};
use crate::http::{ApiError, AppState};
use crate::services::announcements::{Announcement, NewAnnouncement, SEVERITIES};

#[derive(Template)]
#[template(path = "admin/announcements.html")]
struct AnnouncementsPage {
    nav: Nav,
    announcements: Vec<Announcement>,
    severities: &'static [&'static str],
    form: AnnounceForm,
    /// Why the last form was refused.
    error: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct AnnounceForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    severity: String,
    /// `datetime-local` values, read as UTC (the page says so).
    #[serde(default)]
    starts_at: String,
    #[serde(default)]
    ends_at: String,
}

impl CsrfField for AnnounceForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

async fn page(
    state: &AppState,
    admin: &Principal,
    form: AnnounceForm,
    error: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    render(
        &AnnouncementsPage {
            nav: Nav::of(admin).at(crate::http::pages::Section::Admin),
            announcements: state.announcements.upcoming(admin).await?,
            severities: &SEVERITIES,
            form,
            error,
        },
        status,
    )
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    page(
        &state,
        &admin.0,
        AnnounceForm::default(),
        None,
        StatusCode::OK,
    )
    .await
}

pub async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    post: AdminPost<AnnounceForm>,
) -> Result<HttpResponse, ApiError> {
    let form = post.form;
    let new = NewAnnouncement {
        message: form.message.clone(),
        severity: Some(form.severity.clone()).filter(|s| !s.is_empty()),
        starts_at: Some(form.starts_at.clone()).filter(|s| !s.is_empty()),
        ends_at: form.ends_at.clone(),
    };
    match state
        .announcements
        .create(&post.admin, &state.client_addr(&req), &new)
        .await
        .map_err(PageError::from)
    {
        Ok(_) => Ok(see_other("/admin/announcements")),
        Err(PageError::Invalid(m)) => {
            page(&state, &post.admin, form, Some(m), StatusCode::BAD_REQUEST).await
        }
        Err(PageError::Refused { message, status }) => {
            page(&state, &post.admin, form, Some(message), status).await
        }
        Err(PageError::NotFound) => not_found_page(),
        Err(PageError::Failed(e)) => Err(e),
    }
}

pub async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<i64>,
    post: AdminPost<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    match state
        .announcements
        .delete(&post.admin, &state.client_addr(&req), id.into_inner())
        .await
    {
        Ok(_) | Err(ServiceError::NotFound) => Ok(see_other("/admin/announcements")),
        Err(e) => Err(e.into()),
    }
}
