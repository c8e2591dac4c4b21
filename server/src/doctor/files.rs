//! The portal's files: the data directory, its database and key, the TLS certificate;
//! and the folders every job and session binds (`[storage]`, environments' mounts).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::Finding;
use crate::config::Config;

/// A file's owner and mode, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub path: PathBuf,
    pub is_dir: bool,
    pub uid: u32,
    pub mode: u32,
}

fn entry(path: &Path) -> Option<Entry> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some(Entry {
        path: path.to_path_buf(),
        is_dir: meta.is_dir(),
        uid: meta.uid(),
        mode: meta.mode() & 0o7777,
    })
}

/// Every mount source that jobs and sessions bind and that is not there (or cannot
/// be looked at): `storage.datasets: /srv/datasets (at /datasets) does not exist`. A job that binds one fails before its script runs.
pub fn missing_mounts(config: &Config) -> Vec<String> {
    let storage = [
        ("storage.datasets", &config.storage.datasets),
        ("storage.projects", &config.storage.projects),
    ]
    .into_iter()
    .flat_map(|(key, mounts)| mounts.iter().map(move |m| (key.to_string(), m)));
    let environments = config.environments.iter().flat_map(|e| {
        e.mounts
            .iter()
            .map(move |m| (format!("environments \"{}\" mounts", e.name), m))
    });
    storage
        .chain(environments)
        .filter_map(|(key, m)| {
            let e = std::fs::metadata(&m.source).err()?;
            let at = m.target.as_deref().unwrap_or(&m.source);
            Some(format!(
                "{key}: {} (at {}) {}",
                m.source.display(),
                at.display(),
                match e.kind() {
                    std::io::ErrorKind::NotFound => "does not exist".to_string(),
                    std::io::ErrorKind::PermissionDenied => "cannot be reached".to_string(),
                    _ => e.to_string(),
                }
            ))
        })
        .collect()
}

/// The mounts' sources, as [`missing_mounts`] finds them.
pub(super) fn mounts(config: &Config) -> Finding {
    let missing = missing_mounts(config);
    let count = config.storage.datasets.len()
        + config.storage.projects.len()
        + config
            .environments
            .iter()
            .map(|e| e.mounts.len())
            .sum::<usize>();
    if missing.is_empty() {
        return Finding::ok(
            "mounts",
            match count {
                0 => "no shared storage is bound into jobs".to_string(),
                n => format!("the {n} folder(s) bound into jobs and sessions are there"),
            },
        );
    }
    Finding::problem(
        "mounts",
        format!(
            "every job and session fails to start while a folder it binds is missing: {}",
            missing.join("; ")
        ),
        "mount the file system or create the folder, or take it out of the configuration",
    )
}

/// The data directory and the portal's files in it: the database (with its `-wal`
/// and `-shm`) and `jwt.key`.
pub(super) fn data_dir(config: &Config) -> Finding {
    let dir = &config.data_dir;
    let Some(dir_entry) = entry(dir) else {
        return Finding::ok(
            "data_dir",
            format!(
                "{} does not exist yet: the portal creates it (0700) at its first start",
                dir.display()
            ),
        );
    };
    let mut files = vec![dir.join("jwt.key")];
    if let Some(db) = config.database_url().sqlite_file() {
        for suffix in ["", "-wal", "-shm"] {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            files.push(PathBuf::from(name));
        }
    }
    let entries: Vec<Entry> = files.iter().filter_map(|f| entry(f)).collect();
    let (uid, _) = crate::launch::current_ids();
    classify_data_dir(&dir_entry, &entries, uid)
}

/// Classify the data directory and its files (pure): each must belong to `uid` (the
/// portal's user) and be closed to group and others (0700, 0600).
pub(super) fn classify_data_dir(dir: &Entry, files: &[Entry], uid: u32) -> Finding {
    let owner = if uid == 0 {
        "root".to_string()
    } else {
        format!("uid {uid}")
    };
    for e in std::iter::once(dir).chain(files) {
        let shown = e.path.display();
        if e.uid != uid {
            return Finding::problem(
                "data_dir",
                format!(
                    "{shown} belongs to uid {}, not to the portal's user ({owner})",
                    e.uid
                ),
                format!(
                    "chown -R {} {}",
                    if uid == 0 {
                        "root:root".into()
                    } else {
                        uid.to_string()
                    },
                    dir.path.display()
                ),
            );
        }
        if e.mode & 0o077 != 0 {
            let (want, what) = if e.is_dir {
                (0o700, "the database, keys and jobs' environments in it")
            } else {
                (0o600, "the portal's secrets")
            };
            return Finding::problem(
                "data_dir",
                format!("{shown} is mode {:04o}: others can reach {what}", e.mode),
                format!("chmod {want:04o} {shown}"),
            );
        }
    }
    Finding::ok(
        "data_dir",
        format!(
            "{} is {:04o}, owned by {owner}; its {} file(s) private",
            dir.path.display(),
            dir.mode,
            files.len()
        ),
    )
}

/// Warn this long before a certificate expires.
const EXPIRY_WARNING_SECS: i64 = 30 * 24 * 3600;

/// The TLS certificate's expiry.
pub(super) fn tls(config: &Config, now: i64) -> Finding {
    let Some(cert) = &config.tls.cert_file else {
        return Finding::skipped(
            "tls",
            "no [tls]: plain HTTP (behind a TLS-terminating proxy, say)",
        );
    };
    let fix = "renew the certificate, then restart the portal (tls.cert_file)";
    let pem = match std::fs::read(cert) {
        Ok(pem) => pem,
        Err(e) => {
            return Finding::problem(
                "tls",
                format!("cannot read {}: {e}", cert.display()),
                "correct tls.cert_file",
            )
        }
    };
    match not_after(&pem) {
        Ok((subject, expires)) => classify_expiry(cert, &subject, expires, now),
        Err(e) => Finding::problem(
            "tls",
            format!("{}: {e}", cert.display()),
            format!("{fix}: a PEM certificate chain, the portal's first"),
        ),
    }
}

/// The subject and the `notAfter` (Unix seconds) of the first certificate of a PEM
/// chain.
pub(super) fn not_after(pem: &[u8]) -> Result<(String, i64), String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|e| format!("no PEM certificate in it ({e})"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("not an X.509 certificate ({e})"))?;
    Ok((
        cert.subject().to_string(),
        cert.validity().not_after.timestamp(),
    ))
}

/// Classify a certificate's expiry at `now` (pure).
pub(super) fn classify_expiry(cert: &Path, subject: &str, expires: i64, now: i64) -> Finding {
    let when = crate::util::rfc3339(expires.saturating_mul(1000));
    let fix = format!(
        "renew the certificate of {subject} into {} (tls.cert_file) and restart the portal",
        cert.display()
    );
    if expires <= now {
        Finding::problem(
            "tls",
            format!("the certificate of {subject} expired on {when}"),
            fix,
        )
    } else if expires - now < EXPIRY_WARNING_SECS {
        Finding::warning(
            "tls",
            format!(
                "the certificate of {subject} expires on {when}, in {} day(s)",
                (expires - now) / 86400
            ),
            fix,
        )
    } else {
        Finding::ok(
            "tls",
            format!("the certificate of {subject} is valid until {when}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::*;

    fn e(path: &str, is_dir: bool, uid: u32, mode: u32) -> Entry {
        Entry {
            path: path.into(),
            is_dir,
            uid,
            mode,
        }
    }

    #[test]
    fn the_data_directory_and_its_files_must_be_the_portals_alone() {
        let dir = e("/var/lib/atrium", true, 0, 0o700);
        let key = e("/var/lib/atrium/jwt.key", false, 0, 0o600);
        assert_eq!(
            classify_data_dir(&dir, std::slice::from_ref(&key), 0).status,
            Status::Ok
        );
        let open = classify_data_dir(&e("/var/lib/atrium", true, 0, 0o777), &[], 0);
        assert_eq!(open.status, Status::Problem);
        assert!(open.finding.contains("mode 0777"), "{open:?}");
        assert_eq!(open.fix.as_deref(), Some("chmod 0700 /var/lib/atrium"));
        let readable =
            classify_data_dir(&dir, &[e("/var/lib/atrium/atrium.db", false, 0, 0o644)], 0);
        assert_eq!(
            readable.fix.as_deref(),
            Some("chmod 0600 /var/lib/atrium/atrium.db")
        );
        let foreign = classify_data_dir(&e("/var/lib/atrium", true, 1000, 0o700), &[], 0);
        assert_eq!(foreign.status, Status::Problem);
        assert!(foreign
            .fix
            .as_deref()
            .is_some_and(|f| f.starts_with("chown -R root:root")));
    }

    #[test]
    fn a_certificate_is_a_problem_once_expired_and_a_warning_within_thirty_days() {
        let cert = Path::new("/etc/atrium/cert.pem");
        let now = 2_000_000_000;
        let day = 86400;
        assert_eq!(
            classify_expiry(cert, "CN=portal", now - 1, now).status,
            Status::Problem
        );
        let soon = classify_expiry(cert, "CN=portal", now + 10 * day, now);
        assert_eq!(soon.status, Status::Warning);
        assert!(soon.finding.contains("in 10 day(s)"), "{soon:?}");
        assert_eq!(
            classify_expiry(cert, "CN=portal", now + 90 * day, now).status,
            Status::Ok
        );
    }

    #[test]
    fn garbage_is_not_a_certificate() {
        assert!(not_after(b"hello").is_err());
        assert!(
            not_after(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").is_err()
        );
    }
}
