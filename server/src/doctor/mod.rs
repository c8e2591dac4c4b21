//! `atrium doctor`: checks of the host and of the configuration, each with what it
//! found and, for what is wrong, the one-line fix.
//!
//! Each check is a [`Finding`]: ok, a warning (atrium runs, with less: memory limits
//! by sampling, migrations still to apply), a problem (something will fail: a
//! runtime that cannot start a container, a directory that refuses the service
//! account, an expired certificate, a data directory others can read), or skipped
//! (not configured). The checks reuse what the portal itself runs: the runtimes'
//! command lines (`launch`), `nvidia-smi`'s queries (`sched::inventory`), the
//! directory's service bind (`auth::ldap`), Slurm's commands (`sched::slurm::cli`)
//! and the store's migrations. Here: the report and its rendering; `host.rs` (the
//! container runtimes, cgroups, GPUs, disk space), `files.rs` (the data directory's
//! permissions, the TLS certificate), `services.rs` (the database, LDAP, Slurm).
//! The classifications are pure functions, unit-tested apart from the probes.
//!
//! Owns: what is checked and how a finding and its fix are worded.
//! Must not touch: anything it checks. It changes no file, applies no migration and
//! starts no service; a probe's scratch directory is its own and removed after.

mod files;
mod host;
mod services;

pub use files::missing_mounts;

use serde::Serialize;

use crate::config::Config;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// atrium works, with less than it could.
    Warning,
    /// Something will fail until it is fixed.
    Problem,
    /// Not configured here.
    Skipped,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Problem => "problem",
            Status::Skipped => "skipped",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Which check: `runtime`, `cgroups`, `gpus`, `ldap`, `slurm`, `data_dir`,
    /// `database`, `tls`, `disk`, or `environment NAME`.
    pub check: String,
    pub status: Status,
    /// What was found, in one line.
    pub finding: String,
    /// For a warning or a problem: what to do, in one line (a command or a key).
    pub fix: Option<String>,
}

impl Finding {
    pub fn ok(check: &str, finding: impl Into<String>) -> Self {
        Self::new(check, Status::Ok, finding, None)
    }

    pub fn skipped(check: &str, finding: impl Into<String>) -> Self {
        Self::new(check, Status::Skipped, finding, None)
    }

    pub fn warning(check: &str, finding: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(check, Status::Warning, finding, Some(fix.into()))
    }

    pub fn problem(check: &str, finding: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(check, Status::Problem, finding, Some(fix.into()))
    }

    fn new(check: &str, status: Status, finding: impl Into<String>, fix: Option<String>) -> Self {
        Finding {
            check: check.to_string(),
            status,
            finding: finding.into(),
            fix,
        }
    }
}

/// Every finding, in the order checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub problems: usize,
    pub warnings: usize,
    pub checks: Vec<Finding>,
}

impl Report {
    pub fn new(checks: Vec<Finding>) -> Self {
        let count = |s| checks.iter().filter(|f| f.status == s).count();
        Report {
            problems: count(Status::Problem),
            warnings: count(Status::Warning),
            checks,
        }
    }

    /// One line a check, `fix:` indented below it, and a summary line.
    pub fn text(&self) -> String {
        let width = self.checks.iter().map(|f| f.check.len()).max().unwrap_or(0);
        let mut out = String::new();
        for f in &self.checks {
            out.push_str(&format!(
                "{:<8} {:<width$}  {}\n",
                f.status.label(),
                f.check,
                f.finding
            ));
            if let Some(fix) = &f.fix {
                out.push_str(&format!("{:<8} {:<width$}  fix: {fix}\n", "", ""));
            }
        }
        out.push_str(&format!(
            "{} problem(s), {} warning(s)\n",
            self.problems, self.warnings
        ));
        out
    }
}

/// Run every check against `config` and this machine.
pub async fn run(config: &Config) -> Report {
    let mut checks = host::runtimes(config).await;
    checks.push(host::cgroups());
    checks.push(host::gpus(&config.cluster).await);
    checks.push(files::data_dir(config));
    checks.push(files::mounts(config));
    checks.push(host::app_commands(config));
    let (database, store) = services::database(config).await;
    checks.push(database);
    checks.push(services::ldap(config).await);
    checks.push(services::slurm(config, store.as_ref()).await);
    if let Some(store) = store {
        store.close().await;
    }
    checks.push(files::tls(config, crate::util::now_secs()));
    checks.push(host::disk(&config.data_dir));
    Report::new(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_has_a_line_a_check_and_its_fix_below() {
        let report = Report::new(vec![
            Finding::ok("runtime", "bubblewrap runs /usr/bin/true as nobody"),
            Finding::warning("cgroups", "cgroup v1", "boot with X"),
            Finding::problem("data_dir", "/d is mode 0777", "chmod 0700 /d"),
            Finding::skipped("ldap", "no [auth.ldap]"),
        ]);
        assert_eq!((report.problems, report.warnings), (1, 1));
        assert_eq!(
            report.text(),
            "ok       runtime   bubblewrap runs /usr/bin/true as nobody\n\
             warning  cgroups   cgroup v1\n\
             \x20                  fix: boot with X\n\
             problem  data_dir  /d is mode 0777\n\
             \x20                  fix: chmod 0700 /d\n\
             skipped  ldap      no [auth.ldap]\n\
             1 problem(s), 1 warning(s)\n"
        );
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["checks"][2]["status"], "problem");
        assert_eq!(json["checks"][2]["fix"], "chmod 0700 /d");
        assert_eq!(json["problems"], 1);
    }
}
