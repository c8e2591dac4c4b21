//! Server-rendered pages (askama), one struct per page next to its handler.

mod accounting;
mod admin;
mod benchmarks;
mod campaigns;
mod cluster;
mod files;
mod home;
mod jobs;
mod login;
mod outcome;
mod profile;
mod sessions;
mod sizing;
pub mod when;

use actix_web::{web, HttpResponse};
use askama::Template;

pub use self::outcome::PageError;
use super::ApiError;
use crate::auth::Principal;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(home::show))
        .route("/login", web::get().to(login::show))
        .route("/login", web::post().to(login::submit))
        .route("/logout", web::post().to(login::logout))
        .route("/profile", web::get().to(profile::show))
        .route("/tokens", web::post().to(profile::create_token))
        .route("/tokens/{id}/revoke", web::post().to(profile::revoke_token))
        .route("/jobs", web::get().to(jobs::queue::show))
        .route("/jobs", web::post().to(jobs::new::submit))
        // Before `/jobs/{id}`, which would take "new" for an id.
        .route("/jobs/new", web::get().to(jobs::new::show))
        .route("/jobs/rows", web::get().to(jobs::queue::rows))
        .route("/jobs/{id}", web::get().to(jobs::detail::show))
        .route("/jobs/{id}/cancel", web::post().to(jobs::detail::cancel))
        .route("/jobs/{id}/signal", web::post().to(jobs::detail::signal))
        .route("/jobs/{id}/nice", web::post().to(jobs::detail::nice))
        .route(
            "/jobs/{id}/resubmit",
            web::post().to(jobs::detail::resubmit),
        )
        // After the three above: hold, release, requeue, cancel-waiting.
        .route("/jobs/{id}/{action}", web::post().to(jobs::detail::act))
        .route("/files", web::get().to(files::show))
        .route("/files/download", web::get().to(files::download))
        .route("/files/view", web::get().to(files::view))
        .route("/files/save", web::post().to(files::save))
        .route("/cluster", web::get().to(cluster::show))
        .route("/accounting", web::get().to(accounting::show))
        .route("/campaigns", web::get().to(campaigns::list))
        .route("/campaigns", web::post().to(campaigns::create))
        .route("/campaigns/{id}", web::get().to(campaigns::show))
        .route("/benchmarks", web::get().to(benchmarks::list))
        .route("/benchmarks/{id}", web::get().to(benchmarks::show))
        .route(
            "/benchmarks/{id}/delete",
            web::post().to(benchmarks::delete),
        )
        .route("/sizing", web::get().to(sizing::show))
        .route("/sessions", web::post().to(sessions::start))
        // Before `/sessions/{id}`, which would take "new" for an id.
        .route("/sessions/new", web::get().to(sessions::new_form))
        .route("/sessions/{id}", web::get().to(sessions::show))
        .route("/sessions/{id}/stop", web::post().to(sessions::stop))
        .route("/sessions/{id}/dismiss", web::post().to(sessions::dismiss))
        // JupyterLab in hub mode links here (File > Hub Control Panel, restart).
        .route("/hub/{tail:.*}", web::get().to(sessions::hub_link))
        .configure(admin::configure);
}

/// A form whose only field is its CSRF token (logout, revoke).
#[derive(serde::Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// A MIG profile as a part of its GPU: `1/7 of an A100-80GB` (A30s are cut in
/// fourths, the others in sevenths); `None` for what is not a profile.
pub fn mig_part(profile: &str, model: &str) -> Option<String> {
    let g: u32 = profile.split_once("g.")?.0.parse().ok()?;
    let model = model.trim_start_matches("NVIDIA ");
    let parts = if model.to_uppercase().contains("A30") {
        4
    } else {
        7
    };
    let article = if model.starts_with(['A', 'E', 'H', 'I', 'O', 'a', 'e', 'h', 'i', 'o']) {
        "an"
    } else {
        "a"
    };
    Some(format!("{g}/{parts} of {article} {model}"))
}

/// What the header of a signed-in page shows.
pub struct Nav {
    pub username: String,
    pub is_admin: bool,
    pub csrf: String,
    /// The part of the portal the page belongs to, marked `aria-current="page"`.
    pub section: Section,
}

/// The parts of the portal the navigation links to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Section {
    /// A page the navigation does not link to (an error page, say).
    #[default]
    None,
    Dashboard,
    Jobs,
    Files,
    Cluster,
    Usage,
    Benchmarks,
    Sizing,
    Admin,
    Profile,
}

impl Section {
    /// The name the navigation's template asks about (`nav.is("jobs")`).
    pub fn name(self) -> &'static str {
        match self {
            Section::None => "",
            Section::Dashboard => "dashboard",
            Section::Jobs => "jobs",
            Section::Files => "files",
            Section::Cluster => "cluster",
            Section::Usage => "usage",
            Section::Benchmarks => "benchmarks",
            Section::Sizing => "sizing",
            Section::Admin => "admin",
            Section::Profile => "profile",
        }
    }
}

impl Nav {
    /// The header for `p`, no section marked (see [`Nav::at`]).
    pub fn of(p: &Principal) -> Self {
        Self {
            username: p.username.clone(),
            is_admin: p.admin_account,
            csrf: p.csrf_token().to_string(),
            section: Section::None,
        }
    }

    /// The same header with `section` marked as the current one.
    pub fn at(mut self, section: Section) -> Self {
        self.section = section;
        self
    }

    /// Whether the section named `name` is the page's own.
    pub fn is(&self, name: &str) -> bool {
        self.section != Section::None && self.section.name() == name
    }
}

/// The last value of query parameter `name`, trimmed (empty when absent): what a GET
/// form shows again.
pub fn query_value(pairs: &[(String, String)], name: &str) -> String {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

/// Render a page as an HTML response with `status`.
pub fn render(
    page: &impl Template,
    status: actix_web::http::StatusCode,
) -> Result<HttpResponse, ApiError> {
    let html = page.render().map_err(ApiError::internal)?;
    Ok(HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header(("cache-control", "no-store"))
        .body(html))
}

#[derive(Template)]
#[template(path = "message.html")]
pub struct MessagePage<'a> {
    pub title: &'a str,
    pub message: &'a str,
}

pub fn not_found_page() -> Result<HttpResponse, ApiError> {
    render(
        &MessagePage {
            title: "Not found",
            message: "There is nothing at this address.",
        },
        actix_web::http::StatusCode::NOT_FOUND,
    )
}

/// A form post whose CSRF token is missing or wrong.
pub fn csrf_refused() -> Result<HttpResponse, ApiError> {
    render(
        &MessagePage {
            title: "Form expired",
            message: "This form was not accepted (missing or invalid CSRF token). Reload the page and try again.",
        },
        actix_web::http::StatusCode::FORBIDDEN,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header of a signed-in page, for render tests.
    pub fn nav() -> Nav {
        Nav {
            username: "alice".into(),
            is_admin: false,
            csrf: "tok".into(),
            section: Section::None,
        }
    }

    #[test]
    fn message_page_escapes_its_text() {
        let html = MessagePage {
            title: "<script>",
            message: "a & b",
        }
        .render()
        .expect("render");
        assert!(html.contains("&#60;script&#62;"), "{html}");
        assert!(html.contains("a &#38; b"), "{html}");
        assert!(!html.contains("<script>"));
    }
}
