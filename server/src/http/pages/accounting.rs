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
use crate::domain::numbers::{decimals_for, fixed};
use crate::http::api::accounting::caller_query;
use crate::http::authn::PageUser;
use crate::http::error::urlencode;
use crate::http::pages::when::filters;
use crate::http::{ApiError, AppState};
use crate::services::records::{Bucket, UsageKey};

/// Jobs listed on the page (the CSV export has them all).
const JOBS: i64 = 100;

#[derive(Template)]
#[template(path = "accounting.html")]
struct AccountingPage {
    nav: Nav,
    form: Form,
    totals: Totals,
    /// The totals and each row's hours, printed with one precision per column
    /// (the rows as shown add up to the total as shown).
    shown: Shown,
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

/// The hours of the page as printed: the totals and the rows "by" share one
/// precision per column, chosen by [`decimals_for`]; the jobs' columns theirs.
struct Shown {
    gpu_total: String,
    cpu_total: String,
    /// Per row: GPU-hours, CPU-hours.
    rows: Vec<(String, String)>,
    /// Per job listed: GPU-hours, CPU-hours.
    jobs: Vec<(String, String)>,
}

impl Shown {
    fn of(totals: &Totals, rows: &[KeyUsage], jobs: &[JobUsage]) -> Shown {
        let column = |values: Vec<f64>, total: f64, least: usize| {
            let d = decimals_for(&values, total, least, 4);
            (
                values.iter().map(|v| fixed(*v, d)).collect::<Vec<_>>(),
                fixed(total, d),
            )
        };
        let (gpu_rows, gpu_total) = column(
            rows.iter().map(|r| r.totals.gpu_hours).collect(),
            totals.gpu_hours,
            1,
        );
        let (cpu_rows, cpu_total) = column(
            rows.iter().map(|r| r.totals.cpu_hours).collect(),
            totals.cpu_hours,
            1,
        );
        let sum = |f: fn(&JobUsage) -> f64| jobs.iter().map(f).sum::<f64>();
        let (gpu_jobs, _) = column(
            jobs.iter().map(|j| j.gpu_hours).collect(),
            sum(|j| j.gpu_hours),
            2,
        );
        let (cpu_jobs, _) = column(
            jobs.iter().map(|j| j.cpu_hours).collect(),
            sum(|j| j.cpu_hours),
            2,
        );
        Shown {
            gpu_total,
            cpu_total,
            rows: gpu_rows.into_iter().zip(cpu_rows).collect(),
            jobs: gpu_jobs.into_iter().zip(cpu_jobs).collect(),
        }
    }
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
        Err(
            e @ (ApiError::InvalidField { .. }
            | ApiError::InvalidPath { .. }
            | ApiError::Forbidden(_)),
        ) => {
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
    let params = params(&query, me.acts_as_admin());
    let by_name = GroupBy::Key(by).name();
    query.group_by = GroupBy::Key(by);
    let sums = state.usage.answer(&query, JOBS).await?;
    query.group_by = GroupBy::Job;
    let listed = state.usage.answer(&query, JOBS).await?;
    let f = &query.filter;
    let rows = sums.rows.unwrap_or_default();
    let jobs = listed.jobs.unwrap_or_default();
    let shown = Shown::of(&sums.totals, &rows, &jobs);
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
            is_admin: me.acts_as_admin(),
        },
        totals: sums.totals,
        shown,
        by: by_name,
        rows,
        more_jobs: listed.next.is_some(),
        jobs,
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
    use crate::services::records::{Usage, UsageRecord};

    fn key_usage(key: &str, gpu_seconds: f64) -> KeyUsage {
        KeyUsage::of_row(crate::services::records::UsageRow {
            key: key.into(),
            usage: Usage {
                jobs: 1,
                gpu_seconds,
                cpu_seconds: gpu_seconds,
                wall_seconds: gpu_seconds,
            },
        })
    }

    #[test]
    fn a_total_shows_with_the_precision_of_its_rows_and_adds_up() {
        // 0.04 GPU-hours: the total reads 0.04, not 0.0.
        let rows = vec![key_usage("alice", 144.0)];
        let totals: Totals = Usage {
            jobs: 1,
            gpu_seconds: 144.0,
            cpu_seconds: 144.0,
            wall_seconds: 144.0,
        }
        .into();
        let shown = Shown::of(&totals, &rows, &[]);
        assert_eq!(shown.gpu_total, "0.04");
        assert_eq!(shown.rows, [("0.04".to_string(), "0.04".to_string())]);
        // Three rows of 0.14 h each: 0.1 × 3 would not read as 0.4.
        let rows: Vec<KeyUsage> = ["a", "b", "c"]
            .iter()
            .map(|k| key_usage(k, 504.0))
            .collect();
        let totals: Totals = Usage {
            jobs: 3,
            gpu_seconds: 1512.0,
            cpu_seconds: 1512.0,
            wall_seconds: 1512.0,
        }
        .into();
        let shown = Shown::of(&totals, &rows, &[]);
        assert_eq!(shown.gpu_total, "0.42");
        assert!(
            shown.rows.iter().all(|(g, _)| g == "0.14"),
            "{:?}",
            shown.rows
        );
    }

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
        let totals: Totals = usage.into();
        let rows = vec![KeyUsage::of_row(crate::services::records::UsageRow {
            key: "alice".into(),
            usage,
        })];
        let jobs = vec![JobUsage::of(&record, 0)];
        let html = AccountingPage {
            shown: Shown::of(&totals, &rows, &jobs),
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
            totals,
            by: "user",
            rows,
            jobs,
            more_jobs: true,
            chart_url: "/api/v1/accounting/chart.svg?from=2025-03-01&group_by=user".into(),
            csv_jobs_url: "/api/v1/accounting?from=2025-03-01&format=csv".into(),
            csv_rows_url: "/api/v1/accounting?group_by=user&format=csv".into(),
        }
        .render()
        .expect("render");
        assert!(html.contains("id=\"usage-chart\""), "{html}");
        assert!(html.contains("<strong>2.5</strong> GPU-hours"), "{html}");
        assert!(html.contains("<td>2.5</td>"), "{html}");
        assert!(html.contains("<th scope=\"col\">GPU-hours</th>"), "{html}");
        assert_eq!(
            html.matches("<div class=\"table-wrap\" tabindex=\"0\" role=\"region\"")
                .count(),
            2
        );
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
