//! `GET /sizing`: the sizing question as a form (a reference workload or MB/s per GPU,
//! GPUs or storage nodes, a node's throughput, headroom) and its answer with the
//! formula and the data used, beside the published sizing rows.
//!
//! Owns: laying the advice out. Must not touch: the arithmetic (`bench::sizing`) or
//! where its figures come from (the Benchmarks service's `sizing`).

use crate::http::pages::not_found_page;
use crate::http::pages::PageError;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{query_value, render, Nav};
use crate::auth::Scope;
use crate::benchmarks::reference::{self, SizingRow};
use crate::benchmarks::sizing::{figure, Advice};
use crate::http::api::benchmarks::query_pairs;
use crate::http::authn::PageUser;
use crate::http::{ApiError, AppState};

/// The form, filled with the question's values.
#[derive(Default)]
struct Form {
    workload: String,
    mb_per_s_per_gpu: String,
    from_run: String,
    gpus: String,
    storage_nodes: String,
    node: String,
    node_mb_per_s: String,
    headroom: String,
}

#[derive(Template)]
#[template(path = "sizing.html")]
struct SizingPage {
    nav: Nav,
    form: Form,
    rows: &'static [SizingRow],
    advice: Option<Advice>,
    error: Option<String>,
}

impl SizingPage {
    fn figure(&self, value: &f64) -> String {
        figure(*value)
    }

    fn optional(&self, value: &Option<f64>) -> String {
        value.map(figure).unwrap_or_default()
    }

    /// Whether the form names this row's workload.
    fn is_workload(&self, row: &SizingRow) -> bool {
        self.form.workload.eq_ignore_ascii_case(&row.workload)
    }
}

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let pairs = query_pairs(&req)?;
    let value = |name: &str| query_value(&pairs, name);
    let form = Form {
        workload: value("workload"),
        mb_per_s_per_gpu: value("mb_per_s_per_gpu"),
        from_run: value("from_run"),
        gpus: value("gpus"),
        storage_nodes: value("storage_nodes"),
        node: value("node"),
        node_mb_per_s: value("node_mb_per_s"),
        headroom: value("headroom"),
    };
    let asked = pairs.iter().any(|(_, v)| !v.trim().is_empty());
    let (advice, error, status) = if !asked {
        (None, None, StatusCode::OK)
    } else {
        match state
            .benchmarks
            .sizing(&pairs)
            .await
            .map_err(PageError::from)
        {
            Ok(advice) => (Some(advice), None, StatusCode::OK),
            Err(PageError::Invalid(m)) => (None, Some(m), StatusCode::BAD_REQUEST),
            Err(PageError::Refused { message, status }) => (None, Some(message), status),
            Err(PageError::NotFound) => return not_found_page(),
            Err(PageError::Failed(e)) => return Err(e),
        }
    };
    render(
        &SizingPage {
            nav: Nav::of(&me).at(crate::http::pages::Section::Sizing),
            form,
            rows: reference::sizing(),
            advice,
            error,
        },
        status,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmarks::sizing::{advise, SizingQuery};
    use crate::http::pages::tests::nav;

    #[test]
    fn the_sizing_page_shows_the_answer_with_its_formula_and_data() {
        let pairs = [
            (
                "workload".to_string(),
                "training small images (115 KB) ResNet-50".to_string(),
            ),
            ("gpus".to_string(), "80".to_string()),
            ("storage_nodes".to_string(), "3".to_string()),
        ];
        let query = SizingQuery::parse(&pairs).expect("query");
        let advice = advise(&query, None, reference::sizing()).expect("advice");
        let html = SizingPage {
            nav: nav(),
            form: Form {
                workload: pairs[0].1.clone(),
                gpus: "80".into(),
                ..Form::default()
            },
            rows: reference::sizing(),
            advice: Some(advice),
            error: None,
        }
        .render()
        .expect("render");
        assert!(html.contains("id=\"nodes-needed\""), "{html}");
        assert!(
            html.contains("7,200 MB/s ÷ 2,430 MB/s per F800 node = 2.96 ≈ 2.9 F800 nodes"),
            "{html}"
        );
        assert!(html.contains("id=\"gpus-fed\""), "{html}");
        assert!(html.contains("81 GPUs"), "3 × 2430 / 90: {html}");
        assert!(
            html.contains("selected>training small images (115 KB) ResNet-50"),
            "{html}"
        );
        assert!(html.contains("id=\"sizing-rows\""), "{html}");
        let failed = SizingPage {
            nav: nav(),
            form: Form::default(),
            rows: reference::sizing(),
            advice: None,
            error: Some("gpus: <bad>".into()),
        }
        .render()
        .expect("render");
        assert!(failed.contains("gpus: &#60;bad&#62;"), "{failed}");
    }
}
