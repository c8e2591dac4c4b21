//! `GET /admin/quotas`: every quota, and a form to create one; `GET
//! /admin/quotas/{id}`: a form to change one; their posts, and delete.
//!
//! The form's text fields become `QuotaLimits` here; whether the scope and limits are
//! valid, and the change (applied live, audited), is `state.quotas`' (`Quotas::create`
//! and `update` check them, as for the API); a refusal draws the form again.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use super::{see_other, AdminPost, AdminUser, CsrfField};
use crate::auth::Principal;
use crate::domain::quota::{labelled_message, FieldLabel, QuotaLimits, FIELD_LABELS};
use crate::http::api::rfc3339;
use crate::http::pages::when::filters;
use crate::http::pages::{not_found_page, render, CsrfForm, Nav};
use crate::http::{ApiError, AppState};
use crate::services::quotas::ChangedBy;
use crate::services::quotas::{fmt_num, scope_parts, scope_target, Quota, QuotaError};
use crate::util::now_ms;

/// The quota form as posted: every field text, empty for no limit.
#[derive(Debug, Deserialize, Default, Clone)]
pub struct QuotaForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    scope: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    max_gpus: String,
    /// `a100-80gb=2, 1g.10gb=4`.
    #[serde(default)]
    max_gpus_per_type: String,
    #[serde(default)]
    max_gpu_hours: String,
    #[serde(default)]
    max_running_jobs: String,
    #[serde(default)]
    max_submitted_jobs: String,
    #[serde(default)]
    max_sessions: String,
    #[serde(default)]
    max_job_hours: String,
    #[serde(default)]
    max_session_hours: String,
}

fn count(field: &str, text: &str) -> Result<Option<u32>, String> {
    match text.trim() {
        "" => Ok(None),
        t => t.parse().map(Some).map_err(|_| {
            format!("{field}: {t:?} is not a whole number (leave it empty for no limit)")
        }),
    }
}

fn hours(field: &str, text: &str) -> Result<Option<f64>, String> {
    match text.trim() {
        "" => Ok(None),
        t => t.parse().map(Some).map_err(|_| {
            format!("{field}: {t:?} is not a number of hours (leave it empty for no limit)")
        }),
    }
}

fn per_type(text: &str) -> Result<BTreeMap<String, u32>, String> {
    let mut out = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let parsed = pair
            .split_once('=')
            .and_then(|(t, n)| Some((t.trim().to_string(), n.trim().parse().ok()?)));
        let Some((slice, n)) = parsed else {
            return Err(format!(
                "max_gpus_per_type: {pair:?} is not TYPE=N (write a100-80gb=2, 1g.10gb=4)"
            ));
        };
        out.insert(slice, n);
    }
    Ok(out)
}

impl CsrfField for QuotaForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

impl QuotaForm {
    /// The limits the form asks for; the error names the field.
    fn limits(&self) -> Result<QuotaLimits, String> {
        Ok(QuotaLimits {
            max_gpus: count("max_gpus", &self.max_gpus)?,
            max_gpus_per_type: per_type(&self.max_gpus_per_type)?,
            max_gpu_hours: hours("max_gpu_hours", &self.max_gpu_hours)?,
            max_running_jobs: count("max_running_jobs", &self.max_running_jobs)?,
            max_submitted_jobs: count("max_submitted_jobs", &self.max_submitted_jobs)?,
            max_sessions: count("max_sessions", &self.max_sessions)?,
            max_job_hours: hours("max_job_hours", &self.max_job_hours)?,
            max_session_hours: hours("max_session_hours", &self.max_session_hours)?,
        })
    }

    /// The form filled with a quota's limits.
    fn of(q: &Quota) -> Self {
        let l = &q.limits;
        let whole = |n: Option<u32>| n.map(|n| n.to_string()).unwrap_or_default();
        let hours = |h: Option<f64>| h.map(fmt_num).unwrap_or_default();
        let (scope, name) = scope_parts(&q.scope);
        QuotaForm {
            csrf: String::new(),
            scope: scope.into(),
            name: name.into(),
            max_gpus: whole(l.max_gpus),
            max_gpus_per_type: l
                .max_gpus_per_type
                .iter()
                .map(|(t, n)| format!("{t}={n}"))
                .collect::<Vec<_>>()
                .join(", "),
            max_gpu_hours: hours(l.max_gpu_hours),
            max_running_jobs: whole(l.max_running_jobs),
            max_submitted_jobs: whole(l.max_submitted_jobs),
            max_sessions: whole(l.max_sessions),
            max_job_hours: hours(l.max_job_hours),
            max_session_hours: hours(l.max_session_hours),
        }
    }
}

/// A refusal of what the form asked for (the scope, a limit): the form again, saying
/// why beside what it names; anything else is the error page's.
fn refused_field(e: &QuotaError) -> Option<String> {
    match e {
        QuotaError::Invalid { message: m, .. } | QuotaError::UnknownName(m) => {
            Some(labelled_message(m))
        }
        _ => None,
    }
}

/// One field of the form as the page shows it: its label, a hint, the value.
struct FormField {
    name: &'static str,
    label: &'static str,
    hint: &'static str,
    value: String,
    /// `numeric`, `decimal` or `text`, for the on-screen keyboard.
    inputmode: &'static str,
}

impl QuotaForm {
    /// The limits' fields with their labels, in order.
    fn fields(&self) -> Vec<FormField> {
        let values = [
            &self.max_gpus,
            &self.max_gpus_per_type,
            &self.max_gpu_hours,
            &self.max_running_jobs,
            &self.max_submitted_jobs,
            &self.max_sessions,
            &self.max_job_hours,
            &self.max_session_hours,
        ];
        FIELD_LABELS[2..]
            .iter()
            .zip(values)
            .map(|(f, value)| FormField {
                name: f.field,
                label: f.label,
                hint: f.hint,
                value: value.clone(),
                inputmode: match f.field {
                    "max_gpus_per_type" => "text",
                    "max_gpu_hours" | "max_job_hours" | "max_session_hours" => "decimal",
                    _ => "numeric",
                },
            })
            .collect()
    }

    /// The scope's and the name's labels.
    fn scope_label(&self) -> &'static FieldLabel {
        &FIELD_LABELS[0]
    }

    fn name_label(&self) -> &'static FieldLabel {
        &FIELD_LABELS[1]
    }
}

/// The limits in a few words.
fn summary(l: &QuotaLimits) -> String {
    let whole = |n: Option<u32>| n.map(|n| n.to_string());
    let hours = |h: Option<f64>| h.map(|h| format!("{} h", fmt_num(h)));
    let mut parts: Vec<String> = l
        .max_gpus
        .map(|n| format!("GPUs at once {n}"))
        .into_iter()
        .collect();
    parts.extend(
        l.max_gpus_per_type
            .iter()
            .map(|(slice, n)| format!("{slice} at once {n}")),
    );
    let rest = [
        ("GPU-hours per period", l.max_gpu_hours.map(fmt_num)),
        ("running jobs", whole(l.max_running_jobs)),
        ("jobs in the queue", whole(l.max_submitted_jobs)),
        ("sessions at once", whole(l.max_sessions)),
        ("longest job", hours(l.max_job_hours)),
        ("longest session", hours(l.max_session_hours)),
    ];
    parts.extend(
        rest.into_iter()
            .filter_map(|(what, value)| Some(format!("{what} {}", value?))),
    );
    if parts.is_empty() {
        "no limits".into()
    } else {
        parts.join(", ")
    }
}

struct QuotaRow {
    id: i64,
    scope: String,
    name: String,
    limits: String,
    updated_at: String,
    updated_by: String,
}

#[derive(Template)]
#[template(path = "admin/quotas.html")]
struct QuotasPage {
    nav: Nav,
    quotas: Vec<QuotaRow>,
    period: String,
    /// The create form, as posted when it was refused.
    form: QuotaForm,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/quota_edit.html")]
struct QuotaEditPage {
    nav: Nav,
    id: i64,
    /// `user ann`, `default`.
    target: String,
    form: QuotaForm,
    error: Option<String>,
}

fn quotas_page(
    state: &AppState,
    admin: &Principal,
    form: QuotaForm,
    error: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let quotas = state
        .quotas
        .all()
        .iter()
        .map(|q| {
            let (scope, name) = scope_parts(&q.scope);
            QuotaRow {
                id: q.id,
                scope: scope.into(),
                name: name.into(),
                limits: summary(&q.limits),
                updated_at: rfc3339(q.updated_at),
                updated_by: q.updated_by.clone(),
            }
        })
        .collect();
    let page = QuotasPage {
        nav: Nav::of(admin).at(crate::http::pages::Section::Admin),
        quotas,
        period: state.quotas.period_name(),
        form,
        error,
    };
    render(&page, status)
}

fn edit_page(
    admin: &Principal,
    quota: &Quota,
    form: QuotaForm,
    error: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let page = QuotaEditPage {
        nav: Nav::of(admin).at(crate::http::pages::Section::Admin),
        id: quota.id,
        target: scope_target(&quota.scope),
        form,
        error,
    };
    render(&page, status)
}

fn find(state: &AppState, id: i64) -> Option<Quota> {
    state.quotas.all().into_iter().find(|q| q.id == id)
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    quotas_page(&state, &admin.0, QuotaForm::default(), None, StatusCode::OK)
}

pub async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    post: AdminPost<QuotaForm>,
) -> Result<HttpResponse, ApiError> {
    let AdminPost { admin, form } = post;
    let limits = match form.limits() {
        Ok(limits) => limits,
        Err(m) => {
            let m = labelled_message(&m);
            return quotas_page(&state, &admin, form, Some(m), StatusCode::BAD_REQUEST);
        }
    };
    let addr = state.client_addr(&req);
    let audit = ChangedBy::new(&admin, &addr);
    let (kind, name) = (form.scope.trim(), form.name.trim());
    match state
        .quotas
        .create(kind, name, &limits, now_ms(), audit)
        .await
    {
        Ok(_) => Ok(see_other("/admin/quotas")),
        Err(e) if refused_field(&e).is_some() => {
            let m = refused_field(&e);
            quotas_page(&state, &admin, form, m, StatusCode::BAD_REQUEST)
        }
        Err(e @ QuotaError::Conflict) => quotas_page(
            &state,
            &admin,
            form,
            Some(e.to_string()),
            StatusCode::CONFLICT,
        ),
        Err(e) => Err(e.into()),
    }
}

pub async fn edit(
    state: web::Data<AppState>,
    admin: AdminUser,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    let Some(quota) = find(&state, id.into_inner()) else {
        return not_found_page();
    };
    edit_page(
        &admin.0,
        &quota,
        QuotaForm::of(&quota),
        None,
        StatusCode::OK,
    )
}

pub async fn update(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<i64>,
    post: AdminPost<QuotaForm>,
) -> Result<HttpResponse, ApiError> {
    let AdminPost { admin, form } = post;
    let Some(quota) = find(&state, id.into_inner()) else {
        return not_found_page();
    };
    let limits = match form.limits() {
        Ok(limits) => limits,
        Err(m) => {
            let m = labelled_message(&m);
            return edit_page(&admin, &quota, form, Some(m), StatusCode::BAD_REQUEST);
        }
    };
    let addr = state.client_addr(&req);
    let audit = ChangedBy::new(&admin, &addr);
    match state
        .quotas
        .update(quota.id, &limits, now_ms(), audit)
        .await
    {
        Ok(_) => Ok(see_other("/admin/quotas")),
        Err(QuotaError::NotFound) => not_found_page(),
        Err(e) if refused_field(&e).is_some() => {
            let m = refused_field(&e);
            edit_page(&admin, &quota, form, m, StatusCode::BAD_REQUEST)
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<i64>,
    post: AdminPost<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let addr = state.client_addr(&req);
    let audit = ChangedBy::new(&post.admin, &addr);
    match state.quotas.delete(id.into_inner(), now_ms(), audit).await {
        Ok(_) => Ok(see_other("/admin/quotas")),
        Err(QuotaError::NotFound) => not_found_page(),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    fn form(fields: &[(&str, &str)]) -> QuotaForm {
        let mut f = QuotaForm::default();
        for (name, value) in fields {
            let field = match *name {
                "scope" => &mut f.scope,
                "name" => &mut f.name,
                "max_gpus" => &mut f.max_gpus,
                "max_gpus_per_type" => &mut f.max_gpus_per_type,
                "max_gpu_hours" => &mut f.max_gpu_hours,
                "max_job_hours" => &mut f.max_job_hours,
                "max_session_hours" => &mut f.max_session_hours,
                other => panic!("no field {other}"),
            };
            *field = value.to_string();
        }
        f
    }

    /// What the form asks for as `Quotas::create` checks it: the form's text read,
    /// then the scope and limits.
    fn checked(f: &QuotaForm) -> Result<(scheduler::LimitScope, QuotaLimits), String> {
        use crate::services::quotas::{checked_limits, requested_scope};
        let limits = f.limits()?;
        let scope = requested_scope(f.scope.trim(), f.name.trim()).map_err(|e| e.to_string())?;
        checked_limits(&limits).map_err(|e| e.to_string())?;
        Ok((scope, limits))
    }

    #[test]
    fn a_form_becomes_limits_and_back() {
        let f = form(&[
            ("scope", "group"),
            ("name", "vision"),
            ("max_gpus", "4"),
            ("max_gpus_per_type", "a100-80gb=2, 1g.10gb=4"),
            ("max_gpu_hours", "100.5"),
            ("max_session_hours", "8"),
        ]);
        let (scope, limits) = checked(&f).expect("valid");
        assert_eq!(scope, scheduler::LimitScope::Group("vision".into()));
        assert_eq!(limits.max_gpus, Some(4));
        assert_eq!(limits.max_gpus_per_type.get("1g.10gb"), Some(&4));
        assert_eq!(limits.max_gpu_hours, Some(100.5));
        assert_eq!(limits.max_running_jobs, None);
        let quota = Quota {
            id: 1,
            scope,
            limits,
            updated_at: 0,
            updated_by: "admin".into(),
        };
        let back = QuotaForm::of(&quota);
        assert_eq!(back.max_gpus_per_type, "1g.10gb=4, a100-80gb=2");
        assert_eq!(back.max_gpu_hours, "100.5");
        assert_eq!(back.max_sessions, "");
        assert_eq!(
            summary(&quota.limits),
            "GPUs at once 4, 1g.10gb at once 4, a100-80gb at once 2, GPU-hours per period \
             100.5, longest session 8 h"
        );
    }

    #[test]
    fn a_bad_field_is_named() {
        for (fields, named) in [
            (
                vec![("scope", "user"), ("name", "ann"), ("max_gpus", "two")],
                "max_gpus:",
            ),
            (
                vec![
                    ("scope", "user"),
                    ("name", "ann"),
                    ("max_gpus_per_type", "a100"),
                ],
                "max_gpus_per_type:",
            ),
            (
                vec![("scope", "user"), ("name", "ann"), ("max_job_hours", "-1")],
                "limits.max_job_hours:",
            ),
            (vec![("scope", "team"), ("name", "ann")], "scope:"),
            (vec![("scope", "user"), ("name", "a b")], "name:"),
        ] {
            let error = checked(&form(&fields)).expect_err("refused");
            assert!(error.starts_with(named), "{fields:?}: {error}");
        }
        let error = checked(&form(&[
            ("scope", "user"),
            ("name", "ann"),
            ("max_gpus", "two"),
        ]))
        .expect_err("refused");
        assert_eq!(
            labelled_message(&error),
            "Most GPUs at once: \"two\" is not a whole number (leave it empty for no limit)"
        );
    }

    #[test]
    fn quotas_page_lists_quotas_and_shows_the_refused_form() {
        let html = QuotasPage {
            nav: nav(),
            quotas: vec![QuotaRow {
                id: 7,
                scope: "user".into(),
                name: "<ann>".into(),
                limits: "GPUs 2".into(),
                updated_at: "2026-01-02T03:04:05Z".into(),
                updated_by: "admin".into(),
            }],
            period: "month".into(),
            form: form(&[("scope", "user"), ("name", "ann"), ("max_gpus", "two")]),
            error: Some("max_gpus: \"two\" is not a whole number".into()),
        }
        .render()
        .expect("render");
        assert!(html.contains("href=\"/admin/quotas/7\""), "{html}");
        assert!(html.contains("action=\"/admin/quotas/7/delete\""), "{html}");
        assert!(html.contains("&#60;ann&#62;"), "{html}");
        assert!(html.contains("max_gpus: &#34;two&#34; is not"), "{html}");
        assert!(html.contains("name=\"max_gpus\" value=\"two\""), "{html}");
        // Labels people read, with a hint tied to each field; no API names shown.
        assert!(html.contains(">Most GPUs at once<"), "{html}");
        assert!(
            html.contains("aria-describedby=\"hint-max_gpus\""),
            "{html}"
        );
        assert!(html.contains("id=\"hint-max_gpus\""), "{html}");
        assert!(html.contains(">Applies to<"), "{html}");
        assert!(!html.contains("<code>max_gpus</code>"), "{html}");
        assert_eq!(
            html.matches("<div class=\"table-wrap\" tabindex=\"0\" role=\"region\"")
                .count(),
            1
        );
        assert!(html.contains("<option value=\"user\" selected"), "{html}");
    }

    #[test]
    fn edit_page_is_filled_with_the_quota() {
        let quota = Quota {
            id: 3,
            scope: scheduler::LimitScope::DefaultUser,
            limits: QuotaLimits {
                max_sessions: Some(2),
                ..QuotaLimits::default()
            },
            updated_at: 0,
            updated_by: "admin".into(),
        };
        let html = QuotaEditPage {
            nav: nav(),
            id: 3,
            target: scope_target(&quota.scope),
            form: QuotaForm::of(&quota),
            error: None,
        }
        .render()
        .expect("render");
        assert!(html.contains("action=\"/admin/quotas/3\""), "{html}");
        assert!(html.contains("name=\"max_sessions\" value=\"2\""), "{html}");
        assert!(html.contains("Quota: default"), "{html}");
    }
}
