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
