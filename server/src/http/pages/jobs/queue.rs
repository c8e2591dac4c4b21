//! `GET /jobs`: my queue (pending and running, from the scheduler) and my recent
//! jobs that are over (from the database), with filters (state, name or partition,
//! days submitted) kept in the query string; `GET /jobs/rows`: the same two lists
//! alone, which `frontend/js/job-list.js` fetches every few seconds to refresh them
//! in place while the page is visible.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;

use super::filters::{BadFilter, FilterForm, STATES};
use super::{cluster_slices, JobRow, PageQuery, Pager};
use crate::auth::{Principal, Scope};
use crate::http::authn::PageUser;
use crate::http::pages::when::filters;
use crate::http::pages::{render, MessagePage, Nav};
use crate::http::{ApiError, AppState};
use crate::services::reasons::ClusterSlices;

/// How many ended jobs the page lists.
const RECENT: i64 = 20;

/// The two lists of a job page: what the live refresh replaces.
pub struct Lists {
    pub queue: Vec<JobRow>,
    pub pager: Pager,
    pub recent: Vec<JobRow>,
    /// Filters are applied (the empty lists say so).
    pub filtered: bool,
    /// Everyone's jobs (the administrators' list): a user column and cancel buttons.
    pub everyone: bool,
    /// The CSRF token of the cancel buttons.
    pub csrf: String,
}

#[derive(Template)]
#[template(path = "jobs/queue.html")]
struct QueuePage {
    nav: Nav,
    form: FilterForm,
    states: &'static [&'static str],
    list_path: &'static str,
    rows_path: &'static str,
    lists: Lists,
}

#[derive(Template)]
#[template(path = "jobs/rows.html")]
pub struct RowsFragment {
    pub lists: Lists,
}

/// What a job list's query string asks: the form as filled in, the filter read
/// from it, the page.
pub struct ListQuery {
    pub form: FilterForm,
    pub filter: crate::services::jobs::BoardFilter,
    pub page: PageQuery,
}

/// The filters and page of a job list's query string; a 400 page naming the field
/// when one cannot be read (boxed: a response is large beside the query).
pub fn read_query(pairs: &[(String, String)]) -> Result<ListQuery, Box<HttpResponse>> {
    let form = FilterForm::from_pairs(pairs);
    let page = crate::http::pages::query_value(pairs, "page");
    let page = if page.is_empty() {
        None
    } else {
        match page.parse::<usize>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return Err(Box::new(bad_filter(&BadFilter {
                    field: "page",
                    message: "The page must be a number from 1.".into(),
                })))
            }
        }
    };
    match form.filter() {
        Ok(filter) => Ok(ListQuery {
            form,
            filter,
            page: PageQuery { page },
        }),
        Err(bad) => Err(Box::new(bad_filter(&bad))),
    }
}

/// The 400 page for a filter that cannot be read.
pub fn bad_filter(bad: &BadFilter) -> HttpResponse {
    let message = format!(
        "The filter \"{}\" was not understood: {}",
        bad.field, bad.message
    );
    render(
        &MessagePage {
            title: "Bad filter",
            message: &message,
        },
        StatusCode::BAD_REQUEST,
    )
    .unwrap_or_else(|_| HttpResponse::BadRequest().finish())
}

/// The lists `me` asks for, pending reasons worded with the cluster's GPUs in use.
pub async fn lists(
    state: &AppState,
    me: &Principal,
    everyone: bool,
    recent: i64,
    path: &'static str,
    query: &ListQuery,
) -> Result<Lists, ApiError> {
    let page = query.page.queue_page();
    let (queue, total, ended) = state
        .jobs
        .board_filtered(me, everyone, &query.filter, recent, page)
        .await?;
    let slices = if queue.iter().any(|j| j.state == "PENDING") {
        match state.cluster.nodes().await {
            Ok((nodes, _)) => cluster_slices(&nodes),
            Err(_) => ClusterSlices::new(),
        }
    } else {
        ClusterSlices::new()
    };
    Ok(Lists {
        queue: queue
            .into_iter()
            .map(|j| JobRow::explained(j, &slices))
            .collect(),
        pager: Pager::new(path, page, total).keeping(query.form.query()),
        recent: ended.into_iter().map(JobRow::from).collect(),
        filtered: query.form.is_set(),
        everyone,
        csrf: me.csrf_token().to_string(),
    })
}

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    query: crate::http::query::Query<Vec<(String, String)>>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let query = match read_query(&query) {
        Ok(q) => q,
        Err(response) => return Ok(*response),
    };
    let lists = lists(&state, &me, false, RECENT, "/jobs", &query).await?;
    render(
        &QueuePage {
            nav: Nav::of(&me).at(crate::http::pages::Section::Jobs),
            form: query.form,
            states: &STATES,
            list_path: "/jobs",
            rows_path: "/jobs/rows",
            lists,
        },
        StatusCode::OK,
    )
}

/// `GET /jobs/rows`: the lists alone, for the live refresh.
pub async fn rows(
    state: web::Data<AppState>,
    user: PageUser,
    query: crate::http::query::Query<Vec<(String, String)>>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let query = match read_query(&query) {
        Ok(q) => q,
        Err(response) => return Ok(*response),
    };
    let lists = lists(&state, &me, false, RECENT, "/jobs", &query).await?;
    render(&RowsFragment { lists }, StatusCode::OK)
}

#[cfg(test)]
pub(in crate::http::pages) mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    /// A job of alice's for render tests.
    pub fn row(id: &str, name: &str, state: &str) -> JobRow {
        let pending = state == "PENDING";
        JobRow {
            id: id.into(),
            display_id: id.into(),
            user: "alice".into(),
            name: name.into(),
            partition: "gpu".into(),
            state: state.into(),
            waiting: pending.then(|| {
                crate::services::reasons::explain("Resources", "gpu:1", &ClusterSlices::new())
            }),
            expected_start: if pending {
                "2026-01-02T05:00:00Z".into()
            } else {
                String::new()
            },
            submit_time: "2026-01-02T03:04:05Z".into(),
            time_used: "00:00:07".into(),
            time_limit: "01:00:00".into(),
            nodelist: "node1".into(),
            gres: "gpu:1".into(),
            exit_code: if state == "COMPLETED" {
                "0".into()
            } else {
                String::new()
            },
        }
    }

    fn one_page(total: u64) -> Pager {
        Pager::new(
            "/jobs",
            crate::services::jobs::QueuePage {
                number: 1,
                per_page: super::super::QUEUE_PAGE,
            },
            total,
        )
    }

    fn lists(queue: Vec<JobRow>, recent: Vec<JobRow>, pager: Pager, filtered: bool) -> Lists {
        Lists {
            queue,
            pager,
            recent,
            filtered,
            everyone: false,
            csrf: "tok".into(),
        }
    }

    fn page(form: FilterForm, lists: Lists) -> String {
        QueuePage {
            nav: nav(),
            form,
            states: &STATES,
            list_path: "/jobs",
            rows_path: "/jobs/rows",
            lists,
        }
        .render()
        .expect("render")
    }

    #[test]
    fn queue_page_lists_both_tables_and_escapes_names() {
        let html = page(
            FilterForm::default(),
            lists(
                vec![row("7", "<script>alert(1)</script>", "PENDING")],
                vec![row("3", "done", "COMPLETED")],
                one_page(1),
                false,
            ),
        );
        assert!(html.contains("href=\"/jobs/new\""), "{html}");
        assert!(html.contains("href=\"/jobs/7\""), "{html}");
        assert!(html.contains("href=\"/jobs/3\""), "{html}");
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{html}"
        );
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(!html.contains("queue-pages"), "one page: no pager");
        // The reason in words, the expected start as a time, Slurm's code beside.
        assert!(
            html.contains("Waiting for a GPU: not enough are free now; expected start <time datetime=\"2026-01-02T05:00:00Z\""),
            "{html}"
        );
        assert!(html.contains("<code class=\"reason-code\""), "{html}");
        assert!(html.contains(">Resources</code>"), "{html}");
        // Times are <time> elements the page's script shows in local time.
        assert!(
            html.contains("<time datetime=\"2026-01-02T03:04:05Z\""),
            "{html}"
        );
        assert!(html.contains("src=\"/static/js/job-list.js\""), "{html}");
        assert!(html.contains("data-rows=\"/jobs/rows?page=1\""), "{html}");
    }

    #[test]
    fn filters_come_back_in_the_form_and_the_pager() {
        let form = FilterForm {
            state: "PENDING".into(),
            q: "train \"x\"".into(),
            from: "2026-01-01".into(),
            to: String::new(),
            user: String::new(),
        };
        let pager = Pager::new(
            "/jobs",
            crate::services::jobs::QueuePage {
                number: 2,
                per_page: 1,
            },
            3,
        )
        .keeping(form.query());
        let html = page(
            form,
            lists(vec![row("7", "train", "PENDING")], vec![], pager, true),
        );
        assert!(
            html.contains("<option value=\"PENDING\" selected>"),
            "{html}"
        );
        assert!(html.contains("value=\"train &#34;x&#34;\""), "{html}");
        assert!(html.contains("value=\"2026-01-01\""), "{html}");
        assert!(
            html.contains("href=\"/jobs?state=PENDING&#38;q=train%20%22x%22&#38;from=2026-01-01&#38;page=1\" rel=\"prev\""),
            "{html}"
        );
        assert!(html.contains("id=\"filter-clear\""), "{html}");
        assert!(html.contains("No ended job matches the filters."), "{html}");
    }

    #[test]
    fn empty_queue_says_so() {
        let html = page(
            FilterForm::default(),
            lists(vec![], vec![], one_page(0), false),
        );
        assert!(html.contains("id=\"queue-empty\""), "{html}");
        assert!(
            html.contains("No job of yours is pending or running."),
            "{html}"
        );
        assert!(!html.contains("id=\"filter-clear\""), "{html}");
    }

    #[test]
    fn a_bad_filter_is_a_400_naming_the_field() {
        let pairs = vec![("state".to_string(), "DREAMING".to_string())];
        let Err(response) = read_query(&pairs) else {
            panic!("refused")
        };
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let pairs = vec![("page".to_string(), "0".to_string())];
        assert!(read_query(&pairs).is_err());
    }
}
