//! `GET /campaigns`: the caller's benchmark campaigns and the form for a new one (pick
//! a template, the GPU counts and each parameter's values, the repetitions; Estimate
//! shows the points, jobs and GPU-hours before anything is submitted); `POST
//! /campaigns` (estimate or submit); `GET /campaigns/{id}`: a campaign's progress and
//! report, with its HTML and CSV exports.
//!
//! Owns: laying campaigns out for the pages and reading the form into a matrix. Must
//! not touch: planning, submitting or judging a campaign (the Campaigns service).

use crate::http::pages::PageError;
use crate::services::ServiceError;
use std::collections::BTreeMap;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use askama::Template;

use super::{csrf_refused, not_found_page, query_value, render, Nav, Section};
use crate::auth::{Principal, Scope};
use crate::benchmarks::campaign::MatrixSpec;
use crate::http::api::benchmarks::query_pairs;
use crate::http::authn::PageUser;
use crate::http::pages::when::filters;
use crate::http::{ApiError, AppState};
use crate::services::campaigns::{
    CampaignInfo, CampaignReport, Estimate, NewCampaignBody, TemplateInfo,
};

/// One parameter's field on the form.
struct ParamField {
    name: String,
    /// Comma-separated values, as typed (the default at first).
    value: String,
}

#[derive(Template)]
#[template(path = "benchmarks/campaigns.html")]
struct ListPage {
    nav: Nav,
    campaigns: Vec<CampaignInfo>,
    templates: Vec<TemplateInfo>,
    /// The template chosen on the form.
    template: TemplateInfo,
    gpus: String,
    params: Vec<ParamField>,
    repetitions: String,
    name: String,
    estimate: Option<Estimate>,
    error: Option<String>,
}

impl ListPage {
    fn serial_note(&self) -> &'static str {
        if self.template.serial {
            "Its runs do not overlap: one at a time, one array after another."
        } else {
            "Its runs may run side by side where GPUs are free."
        }
    }
}

/// The form as posted: `template`, `gpus`, `p.NAME` (comma-separated values),
/// `repetitions`, `name`, `action` (`estimate` or `submit`), `csrf`.
type FormPairs = Vec<(String, String)>;

/// Comma-separated values, trimmed, empty ones dropped.
fn values(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

/// The template `name` among `templates`, else the first.
fn chosen(templates: &[TemplateInfo], name: &str) -> Option<TemplateInfo> {
    templates
        .iter()
        .find(|t| t.name == name)
        .or_else(|| templates.first())
        .cloned()
}

async fn list_page(
    state: &AppState,
    me: &Principal,
    pairs: &FormPairs,
    estimate: Option<Estimate>,
    error: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let templates = state.campaigns.templates();
    let Some(template) = chosen(&templates, &query_value(pairs, "template")) else {
        return not_found_page();
    };
    let posted = pairs.iter().any(|(k, _)| k == "action");
    let params = template
        .params
        .iter()
        .map(|p| ParamField {
            name: p.name.clone(),
            value: if posted {
                query_value(pairs, &format!("p.{}", p.name))
            } else {
                p.default.clone()
            },
        })
        .collect();
    let gpus = if posted {
        query_value(pairs, "gpus")
    } else {
        template.default_gpus.to_string()
    };
    let repetitions = match query_value(pairs, "repetitions").as_str() {
        "" => "3".to_string(),
        r => r.to_string(),
    };
    let page = ListPage {
        nav: Nav::of(me).at(Section::Benchmarks),
        campaigns: state.campaigns.list(me).await?,
        name: query_value(pairs, "name"),
        templates,
        template,
        gpus,
        params,
        repetitions,
        estimate,
        error,
    };
    render(&page, status)
}

pub async fn list(
    state: web::Data<AppState>,
    user: PageUser,
    req: actix_web::HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let pairs = query_pairs(&req)?;
    list_page(&state, &me, &pairs, None, None, StatusCode::OK).await
}

/// The campaign the form asks for; a bad field names itself.
fn body_of(pairs: &FormPairs) -> Result<NewCampaignBody, String> {
    let gpus = values(&query_value(pairs, "gpus"))
        .iter()
        .map(|g| {
            g.parse::<u32>()
                .map_err(|_| format!("GPU counts: {g:?} is not a whole number"))
        })
        .collect::<Result<Vec<u32>, _>>()?;
    let mut params = BTreeMap::new();
    for (key, text) in pairs {
        if let Some(name) = key.strip_prefix("p.") {
            params.insert(name.to_string(), values(text));
        }
    }
    let repetitions = match query_value(pairs, "repetitions").as_str() {
        "" => 1,
        r => r
            .parse::<u32>()
            .map_err(|_| format!("Repetitions: {r:?} is not a whole number"))?,
    };
    let name = query_value(pairs, "name");
    Ok(NewCampaignBody {
        template: query_value(pairs, "template"),
        script: None,
        name: (!name.is_empty()).then(|| name.to_string()),
        matrix: MatrixSpec {
            gpus,
            params,
            repetitions,
        },
        environment: BTreeMap::new(),
    })
}

pub async fn create(
    state: web::Data<AppState>,
    user: PageUser,
    req: actix_web::HttpRequest,
    form: web::Form<FormPairs>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    let pairs = form.into_inner();
    if !me.csrf_ok(Some(&query_value(&pairs, "csrf"))) {
        return csrf_refused();
    }
    me.require(Scope::Read)?;
    let body = match body_of(&pairs) {
        Ok(body) => body,
        Err(message) => {
            return list_page(
                &state,
                &me,
                &pairs,
                None,
                Some(message),
                StatusCode::BAD_REQUEST,
            )
            .await
        }
    };
    let outcome = if query_value(&pairs, "action") == "submit" {
        me.require(Scope::Jobs)?;
        state
            .campaigns
            .submit(&me, &state.client_addr(&req), &body)
            .await
            .map(|c| Err(c.id))
    } else {
        state.campaigns.estimate(&me, &body).await.map(Ok)
    };
    let (message, status) = match outcome.map_err(PageError::from) {
        Ok(Err(id)) => {
            return Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, format!("/campaigns/{id}")))
                .finish())
        }
        Ok(Ok(estimate)) => {
            return list_page(&state, &me, &pairs, Some(estimate), None, StatusCode::OK).await
        }
        Err(PageError::Invalid(m)) => (m, StatusCode::BAD_REQUEST),
        Err(PageError::Refused { message, status }) => (message, status),
        Err(PageError::NotFound) => return not_found_page(),
        Err(PageError::Failed(e)) => return Err(e),
    };
    list_page(&state, &me, &pairs, None, Some(message), status).await
}

#[derive(Template)]
#[template(path = "benchmarks/campaign.html")]
struct CampaignPage {
    nav: Nav,
    c: CampaignReport,
}

impl CampaignPage {
    /// `value` with one decimal, or a dash.
    fn num(&self, value: &Option<f64>) -> String {
        value.map_or_else(|| "–".to_string(), |v| format!("{v:.1}"))
    }
}

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let Ok(id) = id.parse::<i64>() else {
        return not_found_page();
    };
    match state.campaigns.show(&me, id).await {
        Ok(c) => render(
            &CampaignPage {
                nav: Nav::of(&me).at(Section::Benchmarks),
                c,
            },
            StatusCode::OK,
        ),
        Err(ServiceError::NotFound) => not_found_page(),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> FormPairs {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_form_becomes_a_matrix() {
        let body = body_of(&pairs(&[
            ("template", "resnet50-synthetic"),
            ("gpus", "1, 2,"),
            ("p.PRECISION", "fp16,fp32"),
            ("p.BATCH", "64"),
            ("repetitions", "3"),
            ("name", ""),
        ]))
        .expect("body");
        assert_eq!(body.template, "resnet50-synthetic");
        assert_eq!(body.matrix.gpus, vec![1, 2]);
        assert_eq!(body.matrix.params["PRECISION"], vec!["fp16", "fp32"]);
        assert_eq!(body.matrix.params["BATCH"], vec!["64"]);
        assert_eq!(body.matrix.repetitions, 3);
        assert_eq!(body.name, None);
        let e = body_of(&pairs(&[("gpus", "one")])).expect_err("bad gpus");
        assert!(e.contains("\"one\""), "{e}");
        let e = body_of(&pairs(&[("repetitions", "x")])).expect_err("bad repetitions");
        assert!(e.starts_with("Repetitions"), "{e}");
    }
}
