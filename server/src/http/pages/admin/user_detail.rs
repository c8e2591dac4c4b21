//! `GET /admin/users/{name}`: one account as its administrators see it: the account
//! (source, POSIX identity, state, logins), its groups, the quotas that apply with
//! their use now, its running and pending jobs and its sessions, its latest jobs, and
//! its usage this month (from the accounting records).
//!
//! Owns: laying out what the accounts, jobs and usage services answer. Must not
//! touch: the rules (who sees what, what a quota is): each service's.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;

use super::AdminUser;
use crate::accounting::{GroupBy, Query};
use crate::domain::numbers::{fixed, plural, plural_f, short};
use crate::http::pages::when::filters;
use crate::http::pages::{not_found_page, render, Nav, Section};
use crate::http::{ApiError, AppState};
use crate::services::accounts::UserDetail;
use crate::services::jobs::{JobInfo, JobQuery};
use crate::services::records::UsageKey;
use crate::services::ServiceError;
use crate::util::{now_ms, rfc3339};

/// Latest jobs listed.
const RECENT: u64 = 20;

/// One quota that applies, in words.
struct QuotaLine {
    /// `user ann`, `group vision`, `default`.
    scope: String,
    /// `GPUs 1.5 of 4; GPU-hours 2.25 of 100`.
    use_now: String,
}

#[derive(Template)]
#[template(path = "admin/user.html")]
struct UserPage {
    nav: Nav,
    detail: UserDetail,
    created: String,
    last_login: Option<String>,
    quotas: Vec<QuotaLine>,
    /// GPU-hours used this month, with the precision of its figure.
    month_gpu_hours: String,
    month_cpu_hours: String,
    month_jobs: String,
    month_from: String,
    active: Vec<JobInfo>,
    recent: Vec<JobInfo>,
}

impl UserPage {
    /// A time in ms as RFC 3339, for the `when` filter.
    fn at(&self, ms: &i64) -> String {
        rfc3339(*ms)
    }
}

/// A quota's use now, in words: each limit it sets, with the use beside it.
fn quota_line(q: &crate::services::quotas::QuotaUsage) -> QuotaLine {
    let l = &q.limits;
    let mut parts = Vec::new();
    if let Some(max) = l.max_gpus {
        parts.push(format!(
            "{} in use of {}",
            plural_f(q.gpus_in_use, "GPU", "GPUs"),
            max
        ));
    }
    if let Some(max) = l.max_gpu_hours {
        parts.push(format!(
            "{} of {} this period",
            plural_f(q.gpu_hours_used, "GPU-hour", "GPU-hours"),
            short(max)
        ));
    }
    if let Some(max) = l.max_running_jobs {
        parts.push(format!(
            "{} running of {max}",
            plural(u64::from(q.running_jobs), "job", "jobs")
        ));
    }
    if let Some(max) = l.max_submitted_jobs {
        parts.push(format!(
            "{} in the queue of {max}",
            plural(u64::from(q.submitted_jobs), "job", "jobs")
        ));
    }
    for (slice, max) in &l.max_gpus_per_type {
        let used = q.slices_in_use.get(slice).copied().unwrap_or(0);
        parts.push(format!("{slice}: {used} in use of {max}"));
    }
    if let Some(h) = l.max_job_hours {
        parts.push(format!("jobs of at most {}", plural_f(h, "hour", "hours")));
    }
    if let Some(h) = l.max_session_hours {
        parts.push(format!(
            "sessions of at most {}",
            plural_f(h, "hour", "hours")
        ));
    }
    if let Some(n) = l.max_sessions {
        parts.push(format!(
            "at most {}",
            plural(u64::from(n), "session", "sessions")
        ));
    }
    QuotaLine {
        scope: format!("{} {}", q.scope, q.name).trim_end().to_string(),
        use_now: if parts.is_empty() {
            "no limits".into()
        } else {
            parts.join("; ")
        },
    }
}

pub async fn show(
    state: web::Data<AppState>,
    admin: AdminUser,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let admin = admin.0;
    let name = name.into_inner();
    let detail = match state.accounts.detail(&name).await {
        Ok(d) => d,
        Err(ServiceError::NotFound) => return not_found_page(),
        Err(e) => return Err(e.into()),
    };
    let jobs = |state: Option<&str>, per_page: u64| JobQuery {
        user: Some(name.clone()),
        state: state.map(str::to_string),
        per_page: Some(per_page),
        ..JobQuery::default()
    };
    let active = state.jobs.list(&admin, jobs(None, 100)).await?.jobs;
    let recent = state
        .jobs
        .list(&admin, jobs(Some("all"), RECENT))
        .await?
        .jobs;
    // This month's usage, as the Usage page sums it.
    let mut month = Query::parse(&[("user".to_string(), name.clone())], now_ms())?;
    month.group_by = GroupBy::Key(UsageKey::User);
    let used = state.usage.answer(&month, 1).await?.totals;
    let decimals = crate::domain::numbers::decimals_for(&[used.gpu_hours], used.gpu_hours, 1, 4);
    let page = UserPage {
        nav: Nav::of(&admin).at(Section::Admin),
        created: rfc3339(detail.user.created_at),
        last_login: detail.user.last_login_at.map(rfc3339),
        quotas: detail.quotas.quotas.iter().map(quota_line).collect(),
        month_gpu_hours: fixed(used.gpu_hours, decimals),
        month_cpu_hours: fixed(
            used.cpu_hours,
            crate::domain::numbers::decimals_for(&[used.cpu_hours], used.cpu_hours, 1, 4),
        ),
        month_jobs: plural(
            u64::try_from(used.jobs).unwrap_or(0),
            "job or session",
            "jobs and sessions",
        ),
        month_from: rfc3339(month.filter.from),
        detail,
        active,
        recent,
    };
    render(&page, StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::quota::QuotaLimits;
    use crate::http::pages::tests::nav;
    use crate::services::quotas::{MyUsage, QuotaUsage};
    use crate::services::records::User;

    fn usage(limits: QuotaLimits, gpus: f64, hours: f64) -> QuotaUsage {
        QuotaUsage {
            scope: "user".into(),
            name: "ann".into(),
            limits,
            gpus_in_use: gpus,
            slices_in_use: Default::default(),
            running_jobs: 1,
            submitted_jobs: 2,
            gpu_hours_used: hours,
            period_start: String::new(),
            period_end: String::new(),
        }
    }

    #[test]
    fn a_quota_reads_as_its_use_of_each_limit() {
        let line = quota_line(&usage(
            QuotaLimits {
                max_gpus: Some(4),
                max_gpu_hours: Some(100.0),
                max_running_jobs: Some(1),
                ..QuotaLimits::default()
            },
            1.0,
            2.25,
        ));
        assert_eq!(line.scope, "user ann");
        assert_eq!(
            line.use_now,
            "1 GPU in use of 4; 2.25 GPU-hours of 100 this period; 1 job running of 1"
        );
        assert_eq!(
            quota_line(&usage(QuotaLimits::default(), 0.0, 0.0)).use_now,
            "no limits"
        );
    }

    fn job(id: &str, state: &str) -> JobInfo {
        let mut j =
            crate::services::jobs::from_record(&crate::services::records::JobRecord::default());
        j.id = id.into();
        j.display_id = id.into();
        j.name = format!("<{id}>");
        j.state = state.into();
        j.user = "ann".into();
        j
    }

    #[test]
    fn the_page_shows_the_account_its_jobs_and_its_usage() {
        let html = UserPage {
            nav: nav(),
            detail: UserDetail {
                user: User {
                    id: 3,
                    username: "ann".into(),
                    display_name: "Ann <A>".into(),
                    email: "ann@example.org".into(),
                    source: "local".into(),
                    password_hash: None,
                    uid_number: Some(20001),
                    gid_number: Some(20001),
                    home: Some("/home/ann".into()),
                    login_shell: None,
                    disabled: false,
                    created_at: 0,
                    last_login_at: None,
                },
                admin: false,
                groups: vec!["vision".into()],
                quotas: MyUsage {
                    user: "ann".into(),
                    period: "month".into(),
                    quotas: vec![usage(
                        QuotaLimits {
                            max_gpus: Some(2),
                            ..QuotaLimits::default()
                        },
                        2.0,
                        0.0,
                    )],
                },
                sessions: Vec::new(),
            },
            created: rfc3339(0),
            last_login: None,
            quotas: vec![QuotaLine {
                scope: "user ann".into(),
                use_now: "2 GPUs in use of 2".into(),
            }],
            month_gpu_hours: "0.04".into(),
            month_cpu_hours: "1.0".into(),
            month_jobs: "1 job or session".into(),
            month_from: rfc3339(0),
            active: vec![job("7", "RUNNING")],
            recent: vec![job("5", "COMPLETED")],
        }
        .render()
        .expect("render");
        assert!(html.contains("<h1>ann</h1>"), "{html}");
        assert!(html.contains("Ann &#60;A&#62;"), "{html}");
        assert!(html.contains("vision"), "{html}");
        assert!(html.contains("2 GPUs in use of 2"), "{html}");
        assert!(html.contains("href=\"/jobs/7\""), "{html}");
        assert!(html.contains("href=\"/jobs/5\""), "{html}");
        assert!(html.contains("&#60;5&#62;"), "{html}");
        assert!(html.contains("<strong>0.04</strong> GPU-hours"), "{html}");
        assert!(html.contains("/accounting?user=ann"), "{html}");
        assert!(html.contains("/admin/audit?target=ann"), "{html}");
        assert!(html.contains("No session is running."), "{html}");
    }
}
