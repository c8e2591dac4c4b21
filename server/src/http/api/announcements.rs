//! `/api/v1/announcements` (what everyone is shown now) and
//! `/api/v1/admin/announcements` (administrators: list, announce, withdraw).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
pub use crate::services::announcements::{Announcement, NewAnnouncement};

#[derive(Debug, Serialize, ToSchema)]
pub struct AnnouncementList {
    pub announcements: Vec<Announcement>,
}

/// The announcements shown now, soonest first.
#[utoipa::path(get, path = "/api/v1/announcements", responses((status = 200, body = AnnouncementList)))]
pub async fn current(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(AnnouncementList {
        announcements: state.announcements.current().await?,
    }))
}

/// Every announcement not over yet (administrators).
#[utoipa::path(get, path = "/api/v1/admin/announcements", responses((status = 200, body = AnnouncementList), (status = 403)))]
pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    Ok(HttpResponse::Ok().json(AnnouncementList {
        announcements: state.announcements.upcoming(&caller).await?,
    }))
}

/// Announce to everyone: a message, its severity and its window (audited).
#[utoipa::path(post, path = "/api/v1/admin/announcements", request_body = NewAnnouncement,
    responses((status = 201, body = Announcement), (status = 400, description = "a field that cannot be read, named"), (status = 403)))]
pub async fn create(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    body: web::Json<NewAnnouncement>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let made = state
        .announcements
        .create(&caller, &state.client_addr(&req), &body)
        .await?;
    Ok(HttpResponse::Created().json(made))
}

/// Withdraw an announcement (audited).
#[utoipa::path(delete, path = "/api/v1/admin/announcements/{id}", responses((status = 200, body = Announcement), (status = 404)))]
pub async fn delete(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let id: i64 = id.parse().map_err(|_| ApiError::NotFound)?;
    let gone = state
        .announcements
        .delete(&caller, &state.client_addr(&req), id)
        .await?;
    Ok(HttpResponse::Ok().json(gone))
}
