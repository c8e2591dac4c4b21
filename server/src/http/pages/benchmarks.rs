//! `GET /benchmarks`: benchmark runs (local and reference) with filters, the CSV
//! export, and for a chosen model its scaling chart (local against reference) and its
//! comparison across storage systems; `GET /benchmarks/{id}`: one run;
//! `POST /benchmarks/{id}/delete`.
//!
//! Owns: laying runs out for the pages. Must not touch: SQL, or who may delete a run
//! (the Benchmarks service decides).

use crate::http::pages::PageError;
use std::collections::BTreeSet;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{csrf_refused, not_found_page, query_value, render, CsrfForm, MessagePage, Nav};
use crate::auth::Scope;
use crate::benchmarks::run::ListQuery;
use crate::benchmarks::sizing::figure;
use crate::benchmarks::{names, Suite};
use crate::http::api::benchmarks::query_pairs;
use crate::http::authn::PageUser;
use crate::http::error::urlencode;
use crate::http::pages::when::filters;
use crate::http::{ApiError, AppState};
use crate::services::benchmarks::RunInfo;

/// Runs listed on the page (the CSV export has them all).
const RUNS: i64 = 200;
/// Models offered as chart links.
const MODELS: usize = 24;

/// A run as a table row shows it.
struct RunRow {
    run: RunInfo,
    images_per_sec: String,
    storage_mb_per_s: String,
    /// The other metrics' count.
    more: usize,
}

impl From<RunInfo> for RunRow {
    fn from(run: RunInfo) -> Self {
        let shown = |name: &str| run.metric(name).map(figure).unwrap_or_default();
        RunRow {
            images_per_sec: shown(names::IMAGES_PER_SEC),
            storage_mb_per_s: shown(names::STORAGE_MB_PER_S),
            more: run
                .metrics
                .iter()
                .filter(|m| m.name != names::IMAGES_PER_SEC && m.name != names::STORAGE_MB_PER_S)
                .count(),
            run,
        }
    }
}

/// The filter form, filled with the query's values.
#[derive(Default)]
struct Form {
    model: String,
    gpu_model: String,
    storage: String,
    user: String,
    tag: String,
    source: String,
    from: String,
    to: String,
}

#[derive(Template)]
#[template(path = "benchmarks/list.html")]
struct ListPage {
    nav: Nav,
    form: Form,
    /// Each suite's name, and whether the form has it.
    suites: Vec<(&'static str, bool)>,
    runs: Vec<RunRow>,
    more_runs: bool,
    csv_url: String,
    /// With a model chosen: the charts' URLs.
    scaling_url: Option<String>,
    storage_url: Option<String>,
    /// Without: links charting each model listed.
    model_links: Vec<(String, String)>,
}

/// The query's filters as URL parameters (without paging and format).
fn params(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .filter(|(k, v)| {
            !v.trim().is_empty() && !matches!(k.as_str(), "format" | "limit" | "offset")
        })
        .map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v.trim())))
        .collect::<Vec<_>>()
        .join("&")
}

pub async fn list(
    state: web::Data<AppState>,
    user: PageUser,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let pairs = query_pairs(&req)?;
    let mut query = match ListQuery::parse(&pairs) {
        Ok(q) => q,
        Err(e) => {
            let message = e.to_string();
            return render(
                &MessagePage {
                    title: "Benchmarks",
                    message: &message,
                },
                StatusCode::BAD_REQUEST,
            );
        }
    };
    query.filter.limit = RUNS;
    let (runs, next) = state.benchmarks.list(&query).await?;
    let params = params(&pairs);
    let joined = |base: &str| {
        if params.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{params}")
        }
    };
    let model_chosen = query.filter.model.is_some();
    let models: BTreeSet<&str> = runs
        .iter()
        .filter_map(|r| r.setup.model.as_deref())
        .collect();
    let model_links = if model_chosen {
        Vec::new()
    } else {
        models
            .into_iter()
            .take(MODELS)
            .map(|m| {
                let sep = if params.is_empty() { "" } else { "&" };
                (
                    m.to_string(),
                    format!("/benchmarks?{params}{sep}model={}", urlencode(m)),
                )
            })
            .collect()
    };
    let page = ListPage {
        nav: Nav::of(&me).at(crate::http::pages::Section::Benchmarks),
        suites: Suite::ALL
            .iter()
            .map(|s| (s.name(), query.filter.suite.as_deref() == Some(s.name())))
            .collect(),
        form: Form {
            model: query_value(&pairs, "model"),
            gpu_model: query_value(&pairs, "gpu_model"),
            storage: query_value(&pairs, "storage"),
            user: query_value(&pairs, "user"),
            tag: query_value(&pairs, "tag"),
            source: query_value(&pairs, "source"),
            from: query_value(&pairs, "from"),
            to: query_value(&pairs, "to"),
        },
        more_runs: next.is_some(),
        runs: runs.into_iter().map(RunRow::from).collect(),
        csv_url: format!(
            "/api/v1/benchmarks?{params}{}format=csv",
            if params.is_empty() { "" } else { "&" }
        ),
        scaling_url: model_chosen.then(|| joined("/api/v1/benchmarks/chart/scaling.svg")),
        storage_url: model_chosen.then(|| joined("/api/v1/benchmarks/chart/storage.svg")),
        model_links,
    };
    render(&page, StatusCode::OK)
}

#[derive(Template)]
#[template(path = "benchmarks/show.html")]
struct RunPage {
    nav: Nav,
    run: RunInfo,
    may_delete: bool,
    notice: Option<String>,
}

async fn run_page(
    state: &AppState,
    me: &crate::auth::Principal,
    id: i64,
    notice: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let Some((run, may_delete)) = state.benchmarks.run_for(me, id).await? else {
        return not_found_page();
    };
    let page = RunPage {
        nav: Nav::of(me).at(crate::http::pages::Section::Benchmarks),
        may_delete,
        run,
        notice,
    };
    render(&page, status)
}

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    match id.parse::<i64>() {
        Ok(id) => run_page(&state, &me, id, None, StatusCode::OK).await,
        Err(_) => not_found_page(),
    }
}

pub async fn delete(
    state: web::Data<AppState>,
    user: PageUser,
    req: HttpRequest,
    id: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    if !me.csrf_ok(Some(&form.csrf)) {
        return csrf_refused();
    }
    let Ok(id) = id.parse::<i64>() else {
        return not_found_page();
    };
    me.require(Scope::Jobs)?;
    let deleted = state
        .benchmarks
        .delete(&me, &state.client_addr(&req), id)
        .await
        .map_err(PageError::from);
    match deleted {
        Ok(_) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, "/benchmarks"))
            .finish()),
        Err(PageError::Refused { message, status }) => {
            run_page(&state, &me, id, Some(message), status).await
        }
        Err(PageError::Invalid(m)) => {
            run_page(&state, &me, id, Some(m), StatusCode::BAD_REQUEST).await
        }
        Err(PageError::NotFound) => not_found_page(),
        Err(PageError::Failed(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmarks::{Metric, RunSetup};
    use crate::http::pages::tests::nav;
    use crate::services::records::{BenchmarkRecord, BenchmarkRun};

    fn info(source: &str, model: &str) -> RunInfo {
        RunInfo::from(BenchmarkRecord {
            id: 7,
            created_at: 0,
            run: BenchmarkRun {
                setup: RunSetup {
                    suite: "tf_cnn_benchmarks".into(),
                    model: Some(model.into()),
                    gpus: 8,
                    nodes: 1,
                    ..RunSetup::default()
                },
                user_name: "alice".into(),
                source: source.into(),
                metrics: vec![
                    Metric {
                        name: "images_per_sec".into(),
                        value: 6142.0,
                        unit: "images/s".into(),
                    },
                    Metric {
                        name: "gpu_util_percent".into(),
                        value: 97.0,
                        unit: "%".into(),
                    },
                ],
                ..BenchmarkRun::default()
            },
        })
    }

    #[test]
    fn the_list_page_shows_runs_filters_charts_and_the_export_escaped() {
        let html = ListPage {
            nav: nav(),
            form: Form {
                model: "<ResNet>".into(),
                ..Form::default()
            },
            suites: vec![("fio", true)],
            runs: vec![RunRow::from(info("local", "<ResNet>"))],
            more_runs: true,
            csv_url: "/api/v1/benchmarks?model=%3CResNet%3E&format=csv".into(),
            scaling_url: Some("/api/v1/benchmarks/chart/scaling.svg?model=%3CResNet%3E".into()),
            storage_url: Some("/api/v1/benchmarks/chart/storage.svg?model=%3CResNet%3E".into()),
            model_links: vec![],
        }
        .render()
        .expect("render");
        assert!(html.contains("id=\"benchmark-runs\""), "{html}");
        assert!(html.contains("6,142"), "{html}");
        assert!(html.contains("&#60;ResNet&#62;"), "{html}");
        assert!(!html.contains("<ResNet>"), "{html}");
        assert!(html.contains("id=\"scaling-chart\""), "{html}");
        assert!(html.contains("id=\"storage-chart\""), "{html}");
        assert!(html.contains("format=csv"), "{html}");
        assert!(html.contains("id=\"runs-more\""), "{html}");
        assert_eq!(
            params(&[
                ("model".into(), "a&b".into()),
                ("format".into(), "csv".into()),
                ("tag".into(), " ".into())
            ]),
            "model=a%26b"
        );
    }

    #[test]
    fn the_run_page_shows_its_metrics_and_a_delete_button_when_allowed() {
        let html = RunPage {
            nav: nav(),
            run: info("local", "ResNet-50"),
            may_delete: true,
            notice: None,
        }
        .render()
        .expect("render");
        assert!(html.contains("gpu_util_percent"), "{html}");
        assert!(html.contains("id=\"delete-run\""), "{html}");
        let reference = RunPage {
            nav: nav(),
            run: info("isilon-dss8440-2019", "ResNet-50"),
            may_delete: false,
            notice: Some("reference runs are published results".into()),
        }
        .render()
        .expect("render");
        assert!(!reference.contains("id=\"delete-run\""), "{reference}");
        assert!(reference.contains("isilon-dss8440-2019"), "{reference}");
        assert!(reference.contains("role=\"alert\""), "{reference}");
    }
}
