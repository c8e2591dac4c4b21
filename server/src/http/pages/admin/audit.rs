//! `GET /admin/audit`: the newest audit entries, with what changed before and after;
//! the whole log downloads as CSV from the audit API.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use serde_json::Value;

use super::AdminUser;
use crate::http::pages::{render, Nav};
use crate::http::{ApiError, AppState};
use crate::services::audit::AuditInfo;

/// How many entries the page shows.
const SHOWN: i64 = 500;

struct AuditRow {
    id: i64,
    at: String,
    actor: String,
    action: String,
    target: String,
    /// The detail's `before` and `after` as JSON, empty when it has none.
    before: String,
    after: String,
    /// The rest of the detail as JSON, empty when nothing is left.
    detail: String,
    client_addr: String,
}

impl From<AuditInfo> for AuditRow {
    fn from(e: AuditInfo) -> Self {
        let mut detail = e.detail;
        let mut take = |key: &str| match detail.as_object_mut().and_then(|d| d.remove(key)) {
            Some(value) => value.to_string(),
            None => String::new(),
        };
        let (before, after) = (take("before"), take("after"));
        let detail = match detail {
            Value::Object(rest) if rest.is_empty() => String::new(),
            Value::Null => String::new(),
            rest => rest.to_string(),
        };
        AuditRow {
            id: e.id,
            at: e.at,
            actor: e.actor,
            action: e.action,
            target: e.target,
            before,
            after,
            detail,
            client_addr: e.client_addr,
        }
    }
}

#[derive(Template)]
#[template(path = "admin/audit.html")]
struct AuditPage {
    nav: Nav,
    shown: i64,
    entries: Vec<AuditRow>,
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    let entries = state
        .audit
        .recent(SHOWN)
        .await?
        .into_iter()
        .map(AuditRow::from)
        .collect();
    let page = AuditPage {
        nav: Nav::of(&admin.0).at(crate::http::pages::Section::Admin),
        shown: SHOWN,
        entries,
    };
    render(&page, StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    fn entry(id: i64, detail: Value) -> AuditInfo {
        AuditInfo {
            id,
            at: "2026-01-02T03:04:05Z".into(),
            actor: "admin".into(),
            action: "user.disable".into(),
            target: "<bob>".into(),
            detail,
            client_addr: "127.0.0.1".into(),
        }
    }

    #[test]
    fn before_and_after_have_their_own_columns() {
        let row = AuditRow::from(entry(
            1,
            serde_json::json!({"before": {"disabled": false}, "after": {"disabled": true}}),
        ));
        assert_eq!(row.before, r#"{"disabled":false}"#);
        assert_eq!(row.after, r#"{"disabled":true}"#);
        assert_eq!(row.detail, "");
        let row = AuditRow::from(entry(2, serde_json::json!({"name": "default"})));
        assert_eq!((row.before.as_str(), row.after.as_str()), ("", ""));
        assert_eq!(row.detail, r#"{"name":"default"}"#);
        let row = AuditRow::from(entry(3, Value::String("plain".into())));
        assert_eq!(row.detail, r#""plain""#);
    }

    #[test]
    fn audit_page_escapes_and_links_the_csv() {
        let html = AuditPage {
            nav: nav(),
            shown: SHOWN,
            entries: vec![AuditRow::from(entry(
                9,
                serde_json::json!({"before": null, "after": {"max_gpus": 2}}),
            ))],
        }
        .render()
        .expect("render");
        assert!(
            html.contains("href=\"/api/v1/admin/audit?format=csv"),
            "{html}"
        );
        assert!(html.contains("&#60;bob&#62;"), "{html}");
        assert!(html.contains("user.disable"), "{html}");
        assert!(html.contains("max_gpus"), "{html}");
    }
}
