//! What the portal talks to: its database (the migrations), the directory, Slurm.

use super::Finding;
use crate::auth::ldap::{Directory, DirectoryError};
use crate::config::Config;
use crate::sched::slurm::cli::SlurmCli;
use crate::sched::slurm::parse;
use crate::store::{MigrationStatus, Store};

/// The database answers and its migrations against this binary's; the store, when
/// open, for the checks that read it. No migration is applied, and a SQLite file
/// that does not exist is not created.
pub(super) async fn database(config: &Config) -> (Finding, Option<Store>) {
    let url = config.database_url();
    if let Some(file) = url.sqlite_file() {
        if !file.exists() {
            return (
                Finding::ok(
                    "database",
                    format!(
                        "{} does not exist yet: the portal creates it with every migration \
                         at its first start (or `atrium migrate`)",
                        file.display()
                    ),
                ),
                None,
            );
        }
    }
    let store = match Store::connect(&url, 1).await {
        Ok(store) => store,
        Err(e) => {
            return (
                Finding::problem(
                    "database",
                    format!("cannot open {}: {e}", url.redacted()),
                    "correct database.url, or start the database server",
                ),
                None,
            )
        }
    };
    let finding = match store.migration_status().await {
        Ok(status) => classify_migrations(&status),
        Err(e) => Finding::problem(
            "database",
            format!("cannot read its migrations: {e}"),
            "check the database (atrium backup, then sqlite3 FILE 'PRAGMA integrity_check')",
        ),
    };
    (finding, Some(store))
}

/// Classify the migrations (pure). Pending ones are a warning: `serve` applies them.
pub(super) fn classify_migrations(status: &MigrationStatus) -> Finding {
    let list = |v: &[i64]| {
        v.iter()
            .map(|n| format!("{n:04}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !status.failed.is_empty() {
        return Finding::problem(
            "database",
            format!(
                "migration(s) {} started and did not finish",
                list(&status.failed)
            ),
            "restore the last backup (atrium restore FILE) and run atrium migrate",
        );
    }
    if !status.modified.is_empty() {
        return Finding::problem(
            "database",
            format!(
                "migration(s) {} were applied in another form than this binary's: the \
                 portal will refuse to start",
                list(&status.modified)
            ),
            "run the release that made this database, or restore a backup made by this one",
        );
    }
    if !status.unknown.is_empty() {
        return Finding::problem(
            "database",
            format!(
                "migration(s) {} are not this binary's: a newer release made this database",
                list(&status.unknown)
            ),
            "run the newer release (downgrades are not supported)",
        );
    }
    if !status.pending.is_empty() {
        let pending: Vec<String> = status
            .pending
            .iter()
            .map(|m| format!("{:04} {}", m.version, m.description))
            .collect();
        return Finding::warning(
            "database",
            format!(
                "{} of {} migrations applied; pending: {}",
                status.current,
                status.known,
                pending.join(", ")
            ),
            "atrium migrate (atrium serve applies them at start); atrium backup FILE first",
        );
    }
    Finding::ok(
        "database",
        format!(
            "every migration applied ({} of {})",
            status.current, status.known
        ),
    )
}

/// The directory answers and takes the service account's bind.
pub(super) async fn ldap(config: &Config) -> Finding {
    let Some(ldap) = &config.auth.ldap else {
        return Finding::skipped("ldap", "no [auth.ldap]: local accounts only");
    };
    let url = ldap.url.clone();
    let metrics = match crate::metrics::Metrics::new() {
        Ok(m) => m.ldap.clone(),
        Err(e) => return Finding::problem("ldap", e.to_string(), "report this as a bug"),
    };
    let directory = match Directory::new(ldap.clone(), metrics) {
        Ok(d) => d,
        Err(e) => {
            return Finding::problem(
                "ldap",
                format!("cannot set up the directory's client: {e:#}"),
                "correct auth.ldap (auth.ldap.ca_file, auth.ldap.username_pattern)",
            )
        }
    };
    let bind_dn = ldap.search.as_ref().map(|s| s.bind_dn.clone());
    classify_ldap(
        &url,
        bind_dn.as_deref(),
        directory.check_service_account().await,
    )
}

/// Classify the directory's answer (pure).
pub(super) fn classify_ldap(
    url: &str,
    bind_dn: Option<&str>,
    result: Result<bool, DirectoryError>,
) -> Finding {
    match (result, bind_dn) {
        (Ok(true), Some(dn)) => Finding::ok("ldap", format!("{url} answers; {dn} binds")),
        (Ok(_), _) => Finding::ok(
            "ldap",
            format!("{url} answers (direct bind: no service account to try)"),
        ),
        (Err(DirectoryError::InvalidCredentials | DirectoryError::NotAllowed), dn) => {
            Finding::problem(
                "ldap",
                format!(
                    "{url} refuses the service account {}: no directory user can log in",
                    dn.unwrap_or("")
                ),
                "set auth.ldap.search.bind_dn and bind_password to the account's (or \
                 ATRIUM_AUTH__LDAP__SEARCH__BIND_PASSWORD)",
            )
        }
        (Err(DirectoryError::Unavailable(why)), _) => Finding::problem(
            "ldap",
            format!("cannot reach {url}: {why}"),
            "correct auth.ldap.url, or open the way to the directory (firewall, \
             auth.ldap.starttls, auth.ldap.ca_file)",
        ),
    }
}

/// Slurm's commands answer, and `FirstJobId` is above the internal scheduler's ids.
pub(super) async fn slurm(config: &Config, store: Option<&Store>) -> Finding {
    if !config.scheduler.is_slurm() {
        return Finding::skipped(
            "slurm",
            "the internal scheduler (scheduler.backend is not \"slurm\")",
        );
    }
    let cli = SlurmCli::from_config(&config.slurm, false);
    let fix = "check slurm.bin_dir and slurm.conf, and that slurmctld answers (scontrol ping)";
    let show = match cli
        .admin("scontrol", &["show".into(), "config".into()])
        .await
    {
        Ok(text) => text,
        Err(e) => return Finding::problem("slurm", format!("scontrol show config: {e}"), fix),
    };
    if let Err(e) = cli
        .admin("sinfo", &["--noheader".into(), "--summarize".into()])
        .await
    {
        return Finding::problem("slurm", format!("sinfo: {e}"), fix);
    }
    let highest = match store {
        Some(store) => store.highest_internal_job_id().await.unwrap_or(0),
        None => 0,
    };
    classify_first_job_id(parse::first_job_id(&show), highest)
}

/// Classify `FirstJobId` against the highest job id the internal scheduler gave
/// (pure).
pub(super) fn classify_first_job_id(first: Option<i64>, highest: i64) -> Finding {
    let shown = first.map_or("unknown".to_string(), |f| f.to_string());
    if highest > 0 && first.is_none_or(|f| f <= highest) {
        return Finding::problem(
            "slurm",
            format!(
                "Slurm answers, but FirstJobId ({shown}) is not above atrium's own \
                 highest job id, {highest}: Slurm's new jobs with those ids cannot be recorded"
            ),
            format!(
                "FirstJobId={} in slurm.conf, then restart slurmctld",
                highest + 1
            ),
        );
    }
    Finding::ok(
        "slurm",
        format!("scontrol and sinfo answer; FirstJobId = {shown}"),
    )
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::*;
    use crate::store::KnownMigration;

    fn known(version: i64) -> KnownMigration {
        KnownMigration {
            version,
            description: "jobs".into(),
            checksum: vec![],
        }
    }

    #[test]
    fn pending_migrations_are_a_warning_and_foreign_ones_a_problem() {
        let current = MigrationStatus {
            known: 3,
            current: 3,
            ..MigrationStatus::default()
        };
        assert_eq!(classify_migrations(&current).status, Status::Ok);
        let older = MigrationStatus {
            known: 3,
            current: 2,
            pending: vec![known(15)],
            ..MigrationStatus::default()
        };
        let f = classify_migrations(&older);
        assert_eq!(f.status, Status::Warning);
        assert!(f.finding.contains("pending: 0015 jobs"), "{f:?}");
        let newer = MigrationStatus {
            unknown: vec![16],
            ..older.clone()
        };
        assert_eq!(classify_migrations(&newer).status, Status::Problem);
    }

    #[test]
    fn the_service_account_refused_and_the_directory_unreachable_are_problems() {
        let url = "ldap://127.0.0.1:1";
        let dn = Some("cn=portal,dc=example,dc=org");
        assert_eq!(classify_ldap(url, dn, Ok(true)).status, Status::Ok);
        let refused = classify_ldap(url, dn, Err(DirectoryError::InvalidCredentials));
        assert_eq!(refused.status, Status::Problem);
        assert!(refused
            .finding
            .contains("refuses the service account cn=portal"));
        let down = classify_ldap(url, dn, Err(DirectoryError::Unavailable("refused".into())));
        assert!(down.finding.starts_with("cannot reach ldap://127.0.0.1:1"));
        assert!(down
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("auth.ldap.url")));
    }

    #[test]
    fn first_job_id_must_be_above_the_internal_schedulers_ids() {
        assert_eq!(classify_first_job_id(Some(1), 0).status, Status::Ok);
        assert_eq!(classify_first_job_id(Some(5000), 4999).status, Status::Ok);
        let low = classify_first_job_id(Some(1), 4999);
        assert_eq!(low.status, Status::Problem);
        assert_eq!(
            low.fix.as_deref(),
            Some("FirstJobId=5000 in slurm.conf, then restart slurmctld")
        );
    }
}
