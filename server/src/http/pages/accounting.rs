//! `GET /accounting`: usage over a time range (the current month by default) as
//! totals, a chart of GPU-hours per day or month stacked by user or group, a table of
//! the same sums and the first jobs, with links to the CSV exports. Users see their
//! own usage; administrators everyone's, with filters.
//!
//! Owns: laying the accounting answer out for the page. Must not touch: SQL or the
//! rule of who sees what (both are the accounting API's).

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{render, MessagePage, Nav};
use crate::accounting::answer::{JobUsage, KeyUsage, Totals};
use crate::accounting::{GroupBy, Query};
use crate::http::api::accounting::caller_query;
use crate::http::authn::PageUser;
use crate::http::error::urlencode;
use crate::http::{ApiError, AppState};
use crate::store::{Bucket, UsageKey};

/// Jobs listed on the page (the CSV export has them all).
const JOBS: i64 = 100;

#[derive(Template)]
#[template(path = "accounting.html")]
struct AccountingPage {
    nav: Nav,
    form: Form,
    totals: Totals,
    /// `user`, `group` or `account`.
    by: &'static str,
    rows: Vec<KeyUsage>,
    jobs: Vec<JobUsage>,
    more_jobs: bool,
    chart_url: String,
    csv_jobs_url: String,
    csv_rows_url: String,
}

/// The filter form, filled with the query's values.
struct Form {
    from: String,
    to: String,
    user: String,
    group: String,
    account: String,
    partition: String,
    monthly: bool,
    is_admin: bool,
}

/// A time as the form shows it: the date alone at midnight.
fn form_time(ms: i64) -> String {
    let text = crate::accounting::time_text(ms);
    match text.strip_suffix("T00:00:00Z") {
        Some(day) => day.to_string(),
        None => text,
    }
}

/// The query's filters as URL parameters (without `group_by` and `format`).
fn params(q: &Query, is_admin: bool) -> String {
    let f = &q.filter;
    let mut out = format!(
        "from={}&to={}&bucket={}",
        urlencode(&form_time(f.from)),
        urlencode(&form_time(f.to)),
        match q.bucket {
            Bucket::Month => "month",
            Bucket::Week => "week",
            Bucket::Day => "day",
        }
    );
    let user = if is_admin { &f.user } else { &None };
    for (name, value) in [
        ("user", user),
        ("group", &f.group),
        ("account", &f.account),
        ("partition", &f.partition),
    ] {
        if let Some(v) = value {
            out.push_str(&format!("&{name}={}", urlencode(v)));
        }
    }
    out
}

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    let mut query = match caller_query(&req, &me) {
        Ok(q) => q,
        Err(e @ (ApiError::BadRequest(_) | ApiError::Forbidden(_))) => {
            let message = e.to_string();
            return render(
                &MessagePage {
                    title: "Usage",
                    message: &message,
                },
                actix_web::ResponseError::status_code(&e),
            );
        }
        Err(e) => return Err(e),
    };
    let by = match query.group_by {
        GroupBy::Key(key) => key,
        _ => UsageKey::User,
    };
    let params = params(&query, me.is_admin);
    let by_name = GroupBy::Key(by).name();
    query.group_by = GroupBy::Key(by);
    let sums = state.usage.answer(&query, JOBS).await?;
    query.group_by = GroupBy::Job;
    let listed = state.usage.answer(&query, JOBS).await?;
    let f = &query.filter;
    let page = AccountingPage {
        nav: Nav::of(&me).at(crate::http::pages::Section::Usage),
        form: Form {
            from: form_time(f.from),
            to: form_time(f.to),
            user: f.user.clone().unwrap_or_default(),
            group: f.group.clone().unwrap_or_default(),
            account: f.account.clone().unwrap_or_default(),
            partition: f.partition.clone().unwrap_or_default(),
            monthly: query.bucket == Bucket::Month,
            is_admin: me.is_admin,
        },
        totals: sums.totals,
        by: by_name,
        rows: sums.rows.unwrap_or_default(),
        more_jobs: listed.next.is_some(),
        jobs: listed.jobs.unwrap_or_default(),
        chart_url: format!(
            "/api/v1/accounting/chart.svg?{params}&group_by={}",
            if by == UsageKey::Group {
                "group"
            } else {
                "user"
            }
        ),
        csv_jobs_url: format!("/api/v1/accounting?{params}&format=csv"),
        csv_rows_url: format!("/api/v1/accounting?{params}&group_by={by_name}&format=csv"),
    };
    render(&page, StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;
    use crate::store::{Usage, UsageRecord};

    #[test]
    fn accounting_page_renders_totals_rows_jobs_and_exports_escaped() {
        let usage = Usage {
            jobs: 2,
            gpu_seconds: 9000.0,
            cpu_seconds: 3600.0,
            wall_seconds: 3600.0,
        };
        let record = UsageRecord {
            id: 17,
            task: -1,
            user_name: "alice".into(),
            name: "<train>".into(),
            kind: "job".into(),
            state: "COMPLETED".into(),
            gpu_milli: 2500,
            used_ms: 3_600_000,
            end_time: Some(3_600_000),
            ..UsageRecord::default()
        };
        let html = AccountingPage {
            nav: nav(),
            form: Form {
                from: "2025-03-01".into(),
                to: "2025-04-01".into(),
                user: String::new(),
                group: "ml\"team".into(),
                account: String::new(),
                partition: String::new(),
                monthly: false,
                is_admin: false,
            },
            totals: usage.into(),
            by: "user",
            rows: vec![KeyUsage::of_row(crate::store::UsageRow {
                key: "alice".into(),
                usage,
            })],
            jobs: vec![JobUsage::of(&record, 0)],
            more_jobs: true,
            chart_url: "/api/v1/accounting/chart.svg?from=2025-03-01&group_by=user".into(),
            csv_jobs_url: "/api/v1/accounting?from=2025-03-01&format=csv".into(),
            csv_rows_url: "/api/v1/accounting?group_by=user&format=csv".into(),
        }
        .render()
        .expect("render");
        assert!(html.contains("id=\"usage-chart\""), "{html}");
        assert!(html.contains("2.5"), "GPU-hours: {html}");
        assert!(html.contains("&#60;train&#62;"), "{html}");
        assert!(!html.contains("<train>"), "{html}");
        assert!(html.contains("ml&#34;team"), "{html}");
        assert!(html.contains("format=csv"), "{html}");
        assert!(
            !html.contains("name=\"user\""),
            "only administrators pick a user: {html}"
        );
        assert_eq!(
            params(
                &Query::parse(
                    &[
                        ("user".into(), "bob".into()),
                        ("group".into(), "a&b".into())
                    ],
                    0
                )
                .expect("query"),
                true
            ),
            "from=1970-01-01&to=1970-02-01&bucket=day&user=bob&group=a%26b"
        );
    }
}
