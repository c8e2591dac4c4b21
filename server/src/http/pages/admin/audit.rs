//! `GET /admin/audit`: the newest audit entries, filtered by actor, action, target
//! and time range (GET parameters that the form shows again, so a filtered view can
//! be linked), each change shown as the fields that changed, before and after; a bad
//! parameter is a 400 page naming it. The same entries download as CSV from the
//! audit API with the same parameters.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde_json::Value;

use super::AdminUser;
use crate::domain::quota::field_label;
use crate::http::error::urlencode;
use crate::http::pages::when::filters;
use crate::http::pages::{query_value, render, MessagePage, Nav, Section};
use crate::http::{ApiError, AppState};
use crate::services::audit::{parse_filter, AuditInfo};

/// How many entries the page shows.
const SHOWN: i64 = 500;

/// One field of an entry's detail: what it was and what it became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The field as people read it (`Most GPUs at once`, `disabled`).
    pub field: String,
    /// Empty when the entry has no before (a creation) or no after (a deletion).
    pub before: Option<String>,
    pub after: Option<String>,
}

struct AuditRow {
    id: i64,
    at: String,
    actor: String,
    action: String,
    target: String,
    /// The fields that changed, before and after.
    changes: Vec<Change>,
    /// The rest of the detail, a field and its value each.
    detail: Vec<(String, String)>,
    client_addr: String,
}

/// A JSON value as a person reads it: text without quotes, nothing as `none`,
/// lists and objects compact.
fn readable(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        Value::String(s) => s.clone(),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        Value::Number(n) => n.to_string(),
        Value::Object(o) if o.is_empty() => "none".into(),
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| format!("{k} {}", readable(v)))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Array(a) => a.iter().map(readable).collect::<Vec<_>>().join(", "),
    }
}

/// A field's name as people read it: a quota limit's label, else its words.
fn field_name(key: &str) -> String {
    match field_label(key).filter(|f| f.field.starts_with("max_")) {
        Some(f) => f.label.to_string(),
        None => key.replace('_', " "),
    }
}

/// The fields that differ between `before` and `after` (either may be absent or
/// null: a creation or a deletion shows every field on its one side). Two values
/// that are not objects compare as one field, `value`.
pub fn diff(before: Option<&Value>, after: Option<&Value>) -> Vec<Change> {
    let object = |v: Option<&Value>| match v {
        Some(Value::Object(o)) => Some(o.clone()),
        Some(Value::Null) | None => Some(serde_json::Map::new()),
        Some(_) => None,
    };
    match (object(before), object(after)) {
        (Some(b), Some(a)) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .filter(|k| b.get(*k) != a.get(*k))
                .map(|k| Change {
                    field: field_name(k),
                    before: b.get(k).map(readable),
                    after: a.get(k).map(readable),
                })
                .collect()
        }
        _ if before == after => Vec::new(),
        _ => vec![Change {
            field: "value".into(),
            before: before.filter(|v| !v.is_null()).map(readable),
            after: after.filter(|v| !v.is_null()).map(readable),
        }],
    }
}

impl From<AuditInfo> for AuditRow {
    fn from(e: AuditInfo) -> Self {
        let (changes, detail) = match e.detail {
            Value::Object(mut d) => {
                let (before, after) = (d.remove("before"), d.remove("after"));
                let changes = if before.is_some() || after.is_some() {
                    diff(before.as_ref(), after.as_ref())
                } else {
                    Vec::new()
                };
                let rest = d
                    .iter()
                    .map(|(k, v)| (field_name(k), readable(v)))
                    .collect();
                (changes, rest)
            }
            Value::Null => (Vec::new(), Vec::new()),
            other => (Vec::new(), vec![("detail".into(), readable(&other))]),
        };
        AuditRow {
            id: e.id,
            at: e.at,
            actor: e.actor,
            action: e.action,
            target: e.target,
            changes,
            detail,
            client_addr: e.client_addr,
        }
    }
}

/// The filter form as asked: each value as given, for the form and the CSV link.
struct FilterForm {
    actor: String,
    action: String,
    target: String,
    from: String,
    to: String,
}

impl FilterForm {
    fn of(pairs: &[(String, String)]) -> FilterForm {
        FilterForm {
            actor: query_value(pairs, "actor"),
            action: query_value(pairs, "action"),
            target: query_value(pairs, "target"),
            from: query_value(pairs, "from"),
            to: query_value(pairs, "to"),
        }
    }

    /// The filter as URL parameters (`&actor=…`), only those given.
    fn params(&self) -> String {
        [
            ("actor", &self.actor),
            ("action", &self.action),
            ("target", &self.target),
            ("from", &self.from),
            ("to", &self.to),
        ]
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("&{k}={}", urlencode(v)))
        .collect()
    }

    fn is_empty(&self) -> bool {
        self.params().is_empty()
    }
}

#[derive(Template)]
#[template(path = "admin/audit.html")]
struct AuditPage {
    nav: Nav,
    shown: i64,
    form: FilterForm,
    csv_url: String,
    entries: Vec<AuditRow>,
}

pub async fn show(
    state: web::Data<AppState>,
    admin: AdminUser,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let pairs: Vec<(String, String)> =
        match web::Query::<Vec<(String, String)>>::from_query(req.query_string()) {
            Ok(q) => q.into_inner(),
            Err(_) => {
                return render(
                    &MessagePage {
                        title: "Audit log",
                        message: "The address's parameters cannot be read.",
                    },
                    StatusCode::BAD_REQUEST,
                )
            }
        };
    let filter = match parse_filter(&pairs) {
        Ok(f) => f,
        Err(e) => {
            let message = format!("The filter's {} is not valid: {}.", e.field, e.message);
            return render(
                &MessagePage {
                    title: "Audit log",
                    message: &message,
                },
                StatusCode::BAD_REQUEST,
            );
        }
    };
    let entries = state
        .audit
        .matching(&filter, SHOWN)
        .await?
        .into_iter()
        .map(AuditRow::from)
        .collect();
    let form = FilterForm::of(&pairs);
    let page = AuditPage {
        nav: Nav::of(&admin.0).at(Section::Admin),
        shown: SHOWN,
        csv_url: format!(
            "/api/v1/admin/audit?format=csv&limit=100000{}",
            form.params()
        ),
        form,
        entries,
    };
    render(&page, StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;
    use serde_json::json;

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

    fn change(field: &str, before: Option<&str>, after: Option<&str>) -> Change {
        Change {
            field: field.into(),
            before: before.map(str::to_string),
            after: after.map(str::to_string),
        }
    }

    #[test]
    fn a_diff_lists_the_fields_that_changed_in_words() {
        let d = diff(
            Some(&json!({"max_gpus": 2, "max_sessions": 1, "max_gpu_hours": 10.5})),
            Some(&json!({"max_gpus": 4, "max_sessions": 1, "max_job_hours": 8})),
        );
        assert_eq!(
            d,
            [
                change("GPU-hours per period", Some("10.5"), None),
                change("Most GPUs at once", Some("2"), Some("4")),
                change("Longest job (hours)", None, Some("8")),
            ]
        );
        // A creation: every field on the after side.
        assert_eq!(
            diff(Some(&Value::Null), Some(&json!({"max_gpus": 2}))),
            [change("Most GPUs at once", None, Some("2"))]
        );
        assert_eq!(
            diff(
                Some(&json!({"disabled": false})),
                Some(&json!({"disabled": true}))
            ),
            [change("disabled", Some("no"), Some("yes"))]
        );
        assert_eq!(
            diff(Some(&json!("a")), Some(&json!("b"))),
            [change("value", Some("a"), Some("b"))]
        );
        assert!(diff(Some(&json!({"a": 1})), Some(&json!({"a": 1}))).is_empty());
        assert_eq!(
            readable(&json!({"max_gpus_per_type": {"1g.10gb": 2}})),
            "max_gpus_per_type 1g.10gb 2"
        );
    }

    #[test]
    fn before_and_after_become_changes_and_the_rest_stays_readable() {
        let row = AuditRow::from(entry(
            1,
            json!({"before": {"disabled": false}, "after": {"disabled": true}, "revoked": 2}),
        ));
        assert_eq!(row.changes, [change("disabled", Some("no"), Some("yes"))]);
        assert_eq!(row.detail, [("revoked".to_string(), "2".to_string())]);
        let row = AuditRow::from(entry(2, json!({"name": "default"})));
        assert!(row.changes.is_empty());
        assert_eq!(row.detail, [("name".to_string(), "default".to_string())]);
        let row = AuditRow::from(entry(3, Value::String("plain".into())));
        assert_eq!(row.detail, [("detail".to_string(), "plain".to_string())]);
    }

    #[test]
    fn audit_page_shows_the_filter_again_and_no_raw_json() {
        let pairs = vec![
            ("actor".to_string(), "ad&min".to_string()),
            ("from".to_string(), "2026-01-01".to_string()),
        ];
        let form = FilterForm::of(&pairs);
        let html = AuditPage {
            nav: nav(),
            shown: SHOWN,
            csv_url: format!("/api/v1/admin/audit?format=csv{}", form.params()),
            form,
            entries: vec![AuditRow::from(entry(
                9,
                json!({"before": null, "after": {"max_gpus": 2}}),
            ))],
        }
        .render()
        .expect("render");
        assert!(
            html.contains(
                "href=\"/api/v1/admin/audit?format=csv&#38;actor=ad%26min&#38;from=2026-01-01\""
            ),
            "{html}"
        );
        assert!(
            html.contains("name=\"actor\" value=\"ad&#38;min\""),
            "{html}"
        );
        assert!(
            html.contains("name=\"from\" type=\"date\" value=\"2026-01-01\""),
            "{html}"
        );
        assert!(html.contains("&#60;bob&#62;"), "{html}");
        assert!(html.contains("user.disable"), "{html}");
        assert!(html.contains("<dt>Most GPUs at once</dt>"), "{html}");
        assert!(!html.contains("{&#34;max_gpus"), "no raw JSON: {html}");
        assert!(
            html.contains("<time datetime=\"2026-01-02T03:04:05Z\""),
            "{html}"
        );
        assert!(
            html.contains("<div class=\"table-wrap\" tabindex=\"0\" role=\"region\""),
            "{html}"
        );
    }
}
