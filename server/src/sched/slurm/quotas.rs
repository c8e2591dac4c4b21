//! atrium's quotas as Slurm association limits: the `sacctmgr` commands that make
//! Slurm enforce what the admin pages show (`atrium slurm apply-quotas`).
//!
//! | atrium quota | Slurm association limit |
//! |---|---|
//! | user `U` | the user's associations (`sacctmgr modify user where name=U`) |
//! | default | every user without a quota of their own |
//! | group `G`, account `A` | the Slurm account of that name (`modify account`) |
//! | `max_gpus` | `GrpTRES=gres/gpu=N` |
//! | `max_gpus_per_type` | `GrpTRES=gres/gpu:TYPE=N` (the type must be in `AccountingStorageTRES`) |
//! | `max_gpu_hours` | `GrpTRESMins=gres/gpu=MINUTES` |
//! | `max_running_jobs` | `MaxJobs` (user) or `GrpJobs` (account) |
//! | `max_submitted_jobs` | `MaxSubmitJobs` (user) or `GrpSubmitJobs` (account) |
//! | `max_job_hours` | `MaxWall` (minutes) |
//!
//! A limit the quota leaves out is cleared (`-1`), so applying again after an edit
//! gives exactly the quota. `max_sessions` and `max_session_hours` have no
//! association limit (sessions are jobs to Slurm): they are reported, not applied.

use scheduler::LimitScope;

use crate::domain::quota::{Quota, QuotaLimits};

/// One `sacctmgr` invocation (its arguments) and what it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SacctmgrCommand {
    pub args: Vec<String>,
}

/// The commands for `quotas`; `users` are atrium's users (the default quota applies
/// to those without their own). Also what cannot be applied, for the admin.
pub fn commands(quotas: &[Quota], users: &[String]) -> (Vec<SacctmgrCommand>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let default = quotas.iter().find(|q| q.scope == LimitScope::DefaultUser);
    for q in quotas {
        let (kind, name, account) = match &q.scope {
            LimitScope::DefaultUser => continue,
            LimitScope::User(u) => ("user", u.as_str(), false),
            LimitScope::Group(g) => ("account", g.as_str(), true),
            LimitScope::Account(a) => ("account", a.as_str(), true),
        };
        out.push(modify(kind, name, &q.limits, account));
        notes.extend(unmapped(&q.scope, &q.limits));
    }
    if let Some(d) = default {
        for user in users {
            let own = quotas
                .iter()
                .any(|q| q.scope == LimitScope::User(user.clone()));
            if !own {
                out.push(modify("user", user, &d.limits, false));
            }
        }
        notes.extend(unmapped(&d.scope, &d.limits));
    }
    (out, notes)
}

fn modify(kind: &str, name: &str, l: &QuotaLimits, account: bool) -> SacctmgrCommand {
    let mut tres = vec![format!("gres/gpu={}", opt(l.max_gpus.map(i64::from)))];
    for (ty, n) in &l.max_gpus_per_type {
        tres.push(format!("gres/gpu:{ty}={n}"));
    }
    let minutes = l.max_gpu_hours.map(|h| (h * 60.0).floor() as i64);
    let wall = l.max_job_hours.map(|h| (h * 60.0).floor() as i64);
    let (jobs, submit) = if account {
        ("GrpJobs", "GrpSubmitJobs")
    } else {
        ("MaxJobs", "MaxSubmitJobs")
    };
    let args = vec![
        "-i".to_string(),
        "modify".into(),
        kind.into(),
        "where".into(),
        format!("name={name}"),
        "set".into(),
        format!("GrpTRES={}", tres.join(",")),
        format!("GrpTRESMins=gres/gpu={}", opt(minutes)),
        format!("{jobs}={}", opt(l.max_running_jobs.map(i64::from))),
        format!("{submit}={}", opt(l.max_submitted_jobs.map(i64::from))),
        format!("MaxWall={}", opt(wall)),
    ];
    SacctmgrCommand { args }
}

/// `-1` clears a limit in `sacctmgr`.
fn opt(n: Option<i64>) -> String {
    n.map_or("-1".into(), |n| n.to_string())
}

fn unmapped(scope: &LimitScope, l: &QuotaLimits) -> Vec<String> {
    let who = crate::domain::quota::scope_target(scope);
    let mut notes = Vec::new();
    if let Some(n) = l.max_sessions {
        notes.push(format!(
            "{who}: max_sessions = {n} has no Slurm association limit (sessions are jobs to \
             Slurm); atrium still refuses sessions over it"
        ));
    }
    if let Some(h) = l.max_session_hours {
        notes.push(format!(
            "{who}: max_session_hours = {h} has no Slurm association limit; atrium still \
             refuses longer sessions"
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(scope: LimitScope, limits: QuotaLimits) -> Quota {
        Quota {
            id: 1,
            scope,
            limits,
            updated_at: 0,
            updated_by: "admin".into(),
        }
    }

    #[test]
    fn quotas_become_association_limits() {
        let mut per_type = std::collections::BTreeMap::new();
        per_type.insert("a100".to_string(), 2);
        let quotas = [
            quota(
                LimitScope::User("ann".into()),
                QuotaLimits {
                    max_gpus: Some(4),
                    max_gpus_per_type: per_type,
                    max_gpu_hours: Some(100.5),
                    max_running_jobs: Some(3),
                    max_sessions: Some(1),
                    ..QuotaLimits::default()
                },
            ),
            quota(
                LimitScope::Group("vision".into()),
                QuotaLimits {
                    max_gpus: Some(8),
                    max_job_hours: Some(24.0),
                    ..QuotaLimits::default()
                },
            ),
            quota(
                LimitScope::DefaultUser,
                QuotaLimits {
                    max_gpus: Some(1),
                    ..QuotaLimits::default()
                },
            ),
        ];
        let (cmds, notes) = commands(&quotas, &["ann".into(), "bob".into()]);
        let lines: Vec<String> = cmds.iter().map(|c| c.args.join(" ")).collect();
        assert_eq!(
            lines,
            [
                "-i modify user where name=ann set GrpTRES=gres/gpu=4,gres/gpu:a100=2 \
                 GrpTRESMins=gres/gpu=6030 MaxJobs=3 MaxSubmitJobs=-1 MaxWall=-1",
                "-i modify account where name=vision set GrpTRES=gres/gpu=8 \
                 GrpTRESMins=gres/gpu=-1 GrpJobs=-1 GrpSubmitJobs=-1 MaxWall=1440",
                "-i modify user where name=bob set GrpTRES=gres/gpu=1 GrpTRESMins=gres/gpu=-1 \
                 MaxJobs=-1 MaxSubmitJobs=-1 MaxWall=-1",
            ]
        );
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("max_sessions"), "{notes:?}");
    }
}
