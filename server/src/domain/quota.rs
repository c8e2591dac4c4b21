//! Quotas as values: a quota's scope (default, user, group, account) and its limits,
//! how they are stored and named, and the scheduler's form of the limits.

use std::collections::BTreeMap;

use scheduler::{LimitScope, Limits};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The limits of one quota; an absent field is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct QuotaLimits {
    /// GPUs in use at once (a MIG instance or shard counts its fraction).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gpus: Option<u32>,
    /// GPUs in use at once per slice type (`a100-80gb`, `1g.10gb`, `shard`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub max_gpus_per_type: BTreeMap<String, u32>,
    /// GPU-hours per period (`quotas.period`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gpu_hours: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_running_jobs: Option<u32>,
    /// Pending plus running jobs (array tasks count one each).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_submitted_jobs: Option<u32>,
    /// Sessions running at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u32>,
    /// Longest time limit of a job (sessions are jobs too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_job_hours: Option<f64>,
    /// Longest time limit of a session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_session_hours: Option<f64>,
}

impl QuotaLimits {
    /// The first field that is out of range, and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (field, hours) in [
            ("max_gpu_hours", self.max_gpu_hours),
            ("max_job_hours", self.max_job_hours),
            ("max_session_hours", self.max_session_hours),
        ] {
            if let Some(h) = hours {
                if !h.is_finite() || !(0.0..=1e9).contains(&h) {
                    return Err((field, "must be a number of hours from 0 to 1e9".into()));
                }
            }
        }
        for name in self.max_gpus_per_type.keys() {
            let ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !ok {
                return Err(("max_gpus_per_type", format!("{name:?} is not a slice type")));
            }
        }
        Ok(())
    }

    /// The scheduler's form.
    pub fn to_limits(&self) -> Limits {
        let secs = |h: f64| (h * 3600.0).round() as u64;
        Limits {
            max_gpus: self.max_gpus,
            max_slices: self.max_gpus_per_type.clone(),
            max_running_jobs: self.max_running_jobs,
            max_submitted_jobs: self.max_submitted_jobs,
            max_gpu_minutes: self.max_gpu_hours.map(|h| (h * 60.0).round() as u64),
            max_wall_secs: self.max_job_hours.map(secs),
        }
    }
}

/// How a quota's field reads on the administrators' pages: its label and a hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLabel {
    /// The field as the API names it (`max_gpus`).
    pub field: &'static str,
    /// As a person reads it (`Most GPUs at once`).
    pub label: &'static str,
    pub hint: &'static str,
}

/// Every field of a quota, the scope and name first, then the limits in the order
/// of [`QuotaLimits`].
pub const FIELD_LABELS: [FieldLabel; 10] = [
    FieldLabel {
        field: "scope",
        label: "Applies to",
        hint: "One user, every member of a group together, an account, or every user without a quota of their own.",
    },
    FieldLabel {
        field: "name",
        label: "User, group or account",
        hint: "Its name as on the cluster; empty for the default quota.",
    },
    FieldLabel {
        field: "max_gpus",
        label: "Most GPUs at once",
        hint: "GPUs in use at the same time; a MIG instance or a shard counts its fraction.",
    },
    FieldLabel {
        field: "max_gpus_per_type",
        label: "Most GPUs of each type at once",
        hint: "TYPE=N, separated by commas: a100-80gb=2, 1g.10gb=4.",
    },
    FieldLabel {
        field: "max_gpu_hours",
        label: "GPU-hours per period",
        hint: "What ended jobs used plus what running jobs reserve, per quota period.",
    },
    FieldLabel {
        field: "max_running_jobs",
        label: "Most running jobs",
        hint: "Jobs and sessions running at the same time.",
    },
    FieldLabel {
        field: "max_submitted_jobs",
        label: "Most jobs in the queue",
        hint: "Pending plus running jobs; each array task counts one.",
    },
    FieldLabel {
        field: "max_sessions",
        label: "Most sessions at once",
        hint: "Notebooks, terminals and TensorBoards running at the same time.",
    },
    FieldLabel {
        field: "max_job_hours",
        label: "Longest job (hours)",
        hint: "The longest time limit a job may ask for; sessions are jobs too.",
    },
    FieldLabel {
        field: "max_session_hours",
        label: "Longest session (hours)",
        hint: "The longest time limit a session may ask for.",
    },
];

/// The label of `field` (`max_gpus`, or `limits.max_gpus` as the API's messages
/// name it); `None` for a name that is not a quota's field.
pub fn field_label(field: &str) -> Option<&'static FieldLabel> {
    let field = field.strip_prefix("limits.").unwrap_or(field);
    FIELD_LABELS.iter().find(|f| f.field == field)
}

/// A message that starts with a field's API name (`limits.max_gpus: must be …`),
/// with the field's label instead (`Most GPUs at once: must be …`).
pub fn labelled_message(message: &str) -> String {
    match message.split_once(": ") {
        Some((field, rest)) => match field_label(field) {
            Some(f) => format!("{}: {rest}", f.label),
            None => message.to_string(),
        },
        None => message.to_string(),
    }
}

/// A quota as stored, with its limits read.
#[derive(Debug, Clone, PartialEq)]
pub struct Quota {
    pub id: i64,
    pub scope: LimitScope,
    pub limits: QuotaLimits,
    pub updated_at: i64,
    pub updated_by: String,
}

/// `(kind, name)` → the scope; `None` for an unknown kind.
pub fn scope_of(kind: &str, name: &str) -> Option<LimitScope> {
    Some(match kind {
        "default" => LimitScope::DefaultUser,
        "user" => LimitScope::User(name.to_string()),
        "group" => LimitScope::Group(name.to_string()),
        "account" => LimitScope::Account(name.to_string()),
        _ => return None,
    })
}

/// The scope as stored: `(kind, name)`.
pub fn scope_parts(scope: &LimitScope) -> (&'static str, &str) {
    match scope {
        LimitScope::DefaultUser => ("default", ""),
        LimitScope::User(n) => ("user", n),
        LimitScope::Group(n) => ("group", n),
        LimitScope::Account(n) => ("account", n),
    }
}

/// A scope as the audit log names it: `default`, `user ann`.
pub fn scope_target(scope: &LimitScope) -> String {
    let (kind, name) = scope_parts(scope);
    format!("{kind} {name}").trim_end().to_string()
}

/// How a scope reads in messages: `your quota`, `group vision's quota`.
pub fn scope_label(scope: &LimitScope) -> String {
    match scope {
        LimitScope::DefaultUser => "the default user quota".into(),
        LimitScope::User(n) => format!("user {n}'s quota"),
        LimitScope::Group(n) => format!("group {n}'s quota"),
        LimitScope::Account(n) => format!("account {n}'s quota"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_has_a_label_and_messages_use_it() {
        let limits = serde_json::to_value(QuotaLimits {
            max_gpus: Some(1),
            max_gpus_per_type: [("a".to_string(), 1)].into(),
            max_gpu_hours: Some(1.0),
            max_running_jobs: Some(1),
            max_submitted_jobs: Some(1),
            max_sessions: Some(1),
            max_job_hours: Some(1.0),
            max_session_hours: Some(1.0),
        })
        .expect("json");
        let fields: Vec<&String> = limits.as_object().expect("object").keys().collect();
        assert_eq!(fields.len(), 8);
        for field in fields {
            let label = field_label(field).expect(field);
            assert!(!label.label.contains('_'), "{label:?}");
            assert!(!label.hint.is_empty(), "{label:?}");
        }
        assert_eq!(
            field_label("max_gpus").map(|f| f.label),
            Some("Most GPUs at once")
        );
        assert_eq!(
            labelled_message("limits.max_gpu_hours: must be a number of hours"),
            "GPU-hours per period: must be a number of hours"
        );
        assert_eq!(
            labelled_message("name: there is no user \"zed\""),
            "User, group or account: there is no user \"zed\""
        );
        assert_eq!(labelled_message("no field here"), "no field here");
        assert_eq!(labelled_message("other: x"), "other: x");
    }
}
