//! Benchmark campaigns: `GET /api/v1/campaigns/templates`, `POST
//! /api/v1/campaigns/estimate` (what a campaign would submit and the GPU-hours it may
//! take, nothing submitted), `POST /api/v1/campaigns` (submit), `GET
//! /api/v1/campaigns` (the caller's; everyone's for an administrator), `GET
//! /api/v1/campaigns/{id}` (progress and report), `GET
//! /api/v1/campaigns/{id}/report.html` and `report.csv` (exports).
//!
//! A campaign is its owner's and the administrators' to see; anyone else gets 404.
//! Submitting needs the `jobs` scope; a bad field is a 400 naming it
//! (`matrix.params.BATCH`), and nothing is submitted.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
pub use crate::services::campaigns::{
    CampaignInfo, CampaignReport, Estimate, NewCampaignBody, TemplateInfo,
};

#[derive(Debug, Serialize, ToSchema)]
pub struct TemplateList {
    pub templates: Vec<TemplateInfo>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CampaignList {
    pub campaigns: Vec<CampaignInfo>,
}

/// The built-in campaign templates and their parameters.
#[utoipa::path(get, path = "/api/v1/campaigns/templates",
    responses((status = 200, body = TemplateList)))]
pub async fn templates(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(TemplateList {
        templates: state.campaigns.templates(),
    }))
}

/// What a campaign would submit (points, jobs, arrays) and the GPU-hours it may take:
/// at every task's time limit, and as the previous campaign of the template took.
#[utoipa::path(post, path = "/api/v1/campaigns/estimate", request_body = NewCampaignBody,
    responses((status = 200, body = Estimate),
              (status = 400, description = "a bad field, named: `template`, `script`, `matrix`, `matrix.gpus`, `matrix.params.NAME`, `matrix.points`, `matrix.repetitions`")))]
pub async fn estimate(
    caller: Principal,
    state: web::Data<AppState>,
    body: web::Json<NewCampaignBody>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(state.campaigns.estimate(&caller, &body).await?))
}

/// Submit a campaign: one job array per GPU count, each task a benchmark job recorded
/// as a run of its point. Nothing is submitted unless every field is good.
#[utoipa::path(post, path = "/api/v1/campaigns", request_body = NewCampaignBody,
    responses((status = 201, body = CampaignInfo),
              (status = 400, description = "a bad field, named; nothing submitted"),
              (status = 403, description = "a quota refuses it")))]
pub async fn create(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    body: web::Json<NewCampaignBody>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let info = state
        .campaigns
        .submit(&caller, &state.client_addr(&req), &body)
        .await?;
    Ok(HttpResponse::Created()
        .insert_header(("Location", format!("/api/v1/campaigns/{}", info.id)))
        .json(info))
}

/// The caller's campaigns (everyone's for an administrator), newest first.
#[utoipa::path(get, path = "/api/v1/campaigns",
    responses((status = 200, body = CampaignList)))]
pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(CampaignList {
        campaigns: state.campaigns.list(&caller).await?,
    }))
}

/// A campaign: its progress and report.
#[utoipa::path(get, path = "/api/v1/campaigns/{id}",
    responses((status = 200, body = CampaignReport), (status = 404)))]
pub async fn get(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(state.campaigns.show(&caller, id.into_inner()).await?))
}

/// The report as one self-contained HTML file (inline style and SVG charts).
#[utoipa::path(get, path = "/api/v1/campaigns/{id}/report.html",
    responses((status = 200, content_type = "text/html"), (status = 404)))]
pub async fn report_html(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let id = id.into_inner();
    let html = state.campaigns.report_html(&caller, id).await?;
    Ok(attachment(id, "html", "text/html; charset=utf-8", html))
}

/// The report as CSV: one row per point.
#[utoipa::path(get, path = "/api/v1/campaigns/{id}/report.csv",
    responses((status = 200, content_type = "text/csv"), (status = 404)))]
pub async fn report_csv(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let id = id.into_inner();
    let csv = state.campaigns.report_csv(&caller, id).await?;
    Ok(attachment(id, "csv", "text/csv; charset=utf-8", csv))
}

/// Campaign `id`'s report as a download `atrium-campaign-ID.EXTENSION`.
fn attachment(id: i64, extension: &str, content_type: &str, body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"atrium-campaign-{id}.{extension}\""),
        ))
        .body(body)
}
