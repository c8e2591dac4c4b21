//! The user's shared storage: their home, created at their first login, and
//! `~/templates`, kept filled from `templates/starters` (embedded in the binary).
//!
//! Owns: creating a missing home (as root: owner uid/gid, mode 0700, never touching
//! one that exists), and copying the starters as the user (`atrium home sync DIR`, run
//! with the user's uid and gid, so a link the user planted in their home can lead
//! nowhere they could not write themselves). A starter the user changed or deleted is
//! left alone; one they did not touch is brought up to date. Must not: fail a login
//! because storage is unavailable (that is logged, and tried again at the next one).

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use rust_embed::RustEmbed;
use sha2::{Digest, Sha256};

use crate::store::{PosixIdentity, Store, User};

#[derive(RustEmbed)]
#[folder = "../templates/starters/"]
struct Starters;

/// Where the user's copy of the starters lives, below their home.
pub const TEMPLATES_DIR: &str = "templates";
/// What was installed, by path: the SHA-256 of each file as written.
const MANIFEST: &str = ".atrium-manifest.json";
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

/// The embedded starters: relative path and contents, sorted by path.
pub fn starters() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = Starters::iter()
        .filter_map(|path| Starters::get(&path).map(|f| (path.to_string(), f.data.into_owned())))
        .collect();
    files.sort();
    files
}

/// One digest over every starter's path and contents: a user whose copy was made from
/// the same digest needs no new sync.
pub fn starters_digest() -> &'static str {
    static DIGEST: OnceLock<String> = OnceLock::new();
    DIGEST.get_or_init(|| {
        let mut hash = Sha256::new();
        for (path, data) in starters() {
            hash.update((path.len() as u64).to_le_bytes());
            hash.update(path.as_bytes());
            hash.update((data.len() as u64).to_le_bytes());
            hash.update(&data);
        }
        hex(&hash.finalize())
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Create `identity`'s home when it does not exist: one directory (its parent must
/// exist), owned by the user, mode 0700. Returns whether it was created. An existing
/// home is never touched.
pub fn ensure_home(identity: &PosixIdentity) -> std::io::Result<bool> {
    let home = &identity.home;
    if std::fs::symlink_metadata(home).is_ok() {
        return Ok(false);
    }
    match home.parent() {
        Some(parent) if parent.is_dir() => {}
        _ => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the directory above {} does not exist", home.display()),
            ))
        }
    }
    match std::fs::DirBuilder::new().mode(0o700).create(home) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(e),
    }
    // Owner and mode are set on the directory just made, held open, not by name: the
    // name could be swapped for a link in between (its parent may be writable by
    // others), and a mode set through a link lands on whatever it leads to.
    use rustix::fs::{fchmod, fchown, open, Gid, Mode, OFlags, Uid};
    let dir = open(
        home,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    fchown(
        &dir,
        Some(Uid::from_raw(identity.uid)),
        Some(Gid::from_raw(identity.gid)),
    )?;
    fchmod(&dir, Mode::from_raw_mode(0o700))?;
    Ok(true)
}

/// What a sync did, by relative path.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub written: Vec<String>,
    /// Changed or deleted by the user, or a file of theirs by that name: left alone.
    pub kept: Vec<String>,
}

/// Bring `dir` (the user's `~/templates`) up to date with `files`, as the user. A file
/// is written when it is missing and was never installed, or when it is exactly what
/// was installed last time; otherwise it is the user's and is kept.
pub fn sync_templates(dir: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<SyncReport> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    let manifest_path = dir.join(MANIFEST);
    let mut manifest: BTreeMap<String, String> = match std::fs::read(&manifest_path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_default(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => return Err(e),
    };
    let mut report = SyncReport::default();
    for (path, data) in files {
        let Some(target) = relative_target(dir, path) else {
            continue;
        };
        let installed = manifest.get(path);
        let current = match std::fs::read(&target) {
            Ok(bytes) => Some(sha256(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let ours = match (&current, installed) {
            (None, None) => true,
            (Some(now), Some(was)) => now == was,
            // Deleted by the user, or a file of theirs that was never ours.
            (None, Some(_)) | (Some(_), None) => false,
        };
        if !ours {
            report.kept.push(path.clone());
            continue;
        }
        let new = sha256(data);
        if current.as_ref() != Some(&new) {
            if let Some(parent) = target.parent() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(parent)?;
            }
            write_replacing(&target, data, executable(path))?;
            report.written.push(path.clone());
        }
        manifest.insert(path.clone(), new);
    }
    let json = serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?;
    write_replacing(&manifest_path, &json, false)?;
    Ok(report)
}

/// `dir/path` when `path` is a plain relative path (no `..`, not absolute).
fn relative_target(dir: &Path, path: &str) -> Option<PathBuf> {
    let rel = Path::new(path);
    rel.components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
        .then(|| dir.join(rel))
}

fn executable(path: &str) -> bool {
    path.ends_with(".sh")
}

/// Write through a new file renamed over `target`: a link at `target` is replaced,
/// never followed.
fn write_replacing(target: &Path, data: &[u8], executable: bool) -> std::io::Result<()> {
    let mut tmp = target.as_os_str().to_owned();
    tmp.push(".atrium-new");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if executable { 0o755 } else { 0o644 })
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&tmp)?;
    f.write_all(data)?;
    drop(f);
    std::fs::rename(&tmp, target)
}

/// The portal's side: at each login, make sure the user's home exists and their
/// templates are current. Runs only as root (otherwise homes are not the portal's to
/// make); each user is looked at once per portal run.
#[derive(Debug)]
pub struct Homes {
    store: Store,
    identities: crate::identities::Identities,
    enabled: bool,
    templates: bool,
    exe: Option<PathBuf>,
    done: Mutex<HashSet<i64>>,
}

impl Homes {
    pub fn new(
        store: Store,
        identities: crate::identities::Identities,
        create_homes: bool,
        templates: bool,
    ) -> Homes {
        Homes {
            store,
            identities,
            enabled: create_homes && nix::unistd::geteuid().is_root(),
            templates,
            exe: std::env::current_exe().ok(),
            done: Mutex::new(HashSet::new()),
        }
    }

    fn done(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        // Inserts only: a panic holding the lock leaves nothing half-done.
        self.done.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Prepare `user`'s storage; errors are logged (the login goes on).
    pub async fn prepare(&self, user: &User) {
        if !self.enabled || self.done().contains(&user.id) {
            return;
        }
        match self.try_prepare(user).await {
            Ok(()) => {
                self.done().insert(user.id);
            }
            Err(e) => {
                tracing::warn!(user = %user.username, error = %e, "preparing the user's home failed; trying again at the next login")
            }
        }
    }

    async fn try_prepare(&self, user: &User) -> anyhow::Result<()> {
        let Some(identity) = self.identities.posix(&user.username).await? else {
            return Ok(());
        };
        let for_home = identity.clone();
        if tokio::task::spawn_blocking(move || ensure_home(&for_home)).await?? {
            tracing::info!(user = %user.username, home = %identity.home.display(), "created the user's home");
        }
        if !self.templates
            || self.store.templates_digest(user.id).await?.as_deref() == Some(starters_digest())
        {
            return Ok(());
        }
        let exe = self
            .exe
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("cannot locate the atrium binary"))?;
        let as_user = crate::privilege::Identity::from_posix(&user.username, identity.clone());
        let (mut child, stdin) = crate::privilege::UserCommand::new(&as_user, exe.clone())
            .args(["home".to_string(), "sync".to_string()])
            .args([identity.home.join(TEMPLATES_DIR).display().to_string()])
            .current_dir(&identity.home)
            .spawn(std::process::Stdio::null(), std::process::Stdio::piped())
            .await?;
        drop(stdin);
        let stderr = child.stderr.take();
        let status = tokio::time::timeout(SYNC_TIMEOUT, child.wait()).await??;
        if !status.success() {
            let mut text = String::new();
            if let Some(mut e) = stderr {
                use tokio::io::AsyncReadExt;
                let _ = e.read_to_string(&mut text).await;
            }
            anyhow::bail!("copying the templates failed ({status}): {}", text.trim());
        }
        self.store
            .set_templates_digest(user.id, starters_digest())
            .await?;
        Ok(())
    }
}

/// `atrium home sync DIR`, run as the user by [`Homes::prepare`].
pub fn sync_command(dir: &Path) -> anyhow::Result<()> {
    if nix::unistd::geteuid().is_root() {
        anyhow::bail!("home sync runs as the home's user, not as root");
    }
    let report = sync_templates(dir, &starters())?;
    for kept in &report.kept {
        eprintln!("kept your {kept}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        list.iter()
            .map(|(p, d)| (p.to_string(), d.as_bytes().to_vec()))
            .collect()
    }

    fn read(dir: &Path, p: &str) -> String {
        std::fs::read_to_string(dir.join(p)).expect("read")
    }

    #[test]
    fn the_starters_are_embedded_and_digested() {
        let all = starters();
        assert!(
            all.iter().any(|(p, _)| p == "jobs/hello.sh"),
            "{:?}",
            all.iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        assert_eq!(starters_digest().len(), 64);
    }

    #[test]
    fn the_starter_notebooks_are_nbformat_4_with_a_kernel() {
        let notebooks: Vec<_> = starters()
            .into_iter()
            .filter(|(p, _)| p.ends_with(".ipynb"))
            .collect();
        assert!(notebooks.len() >= 4, "{notebooks:?}");
        for (path, data) in notebooks {
            let nb: serde_json::Value = serde_json::from_slice(&data).expect(&path);
            assert_eq!(nb["nbformat"], 4, "{path}");
            assert!(nb["metadata"]["kernelspec"]["name"].is_string(), "{path}");
            let cells = nb["cells"].as_array().expect("cells");
            assert!(
                cells.iter().all(|c| c["id"].is_string()),
                "{path}: cell ids"
            );
            assert!(
                cells
                    .iter()
                    .filter(|c| c["cell_type"] == "code")
                    .all(|c| c["outputs"].as_array().is_some_and(Vec::is_empty)),
                "{path}: shipped without outputs"
            );
        }
    }

    #[test]
    fn user_changes_survive_and_untouched_starters_are_updated() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("templates");
        let v1 = files(&[
            ("a.txt", "a1"),
            ("b.txt", "b1"),
            ("jobs/run.sh", "r1"),
            ("mine.txt", "ours"),
        ]);
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("mine.txt"), "the user's own").expect("write");
        let first = sync_templates(&dir, &v1).expect("sync");
        assert_eq!(first.written, vec!["a.txt", "b.txt", "jobs/run.sh"]);
        assert_eq!(first.kept, vec!["mine.txt"]);
        assert_eq!(read(&dir, "mine.txt"), "the user's own");
        let mode = std::fs::metadata(dir.join("jobs/run.sh"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);

        // The user edits a.txt and deletes b.txt; the next version changes all three
        // and adds c.txt.
        std::fs::write(dir.join("a.txt"), "edited").expect("edit");
        std::fs::remove_file(dir.join("b.txt")).expect("delete");
        let v2 = files(&[
            ("a.txt", "a2"),
            ("b.txt", "b2"),
            ("c.txt", "c2"),
            ("jobs/run.sh", "r2"),
            ("mine.txt", "ours"),
        ]);
        let second = sync_templates(&dir, &v2).expect("sync");
        assert_eq!(second.written, vec!["c.txt", "jobs/run.sh"]);
        assert_eq!(second.kept, vec!["a.txt", "b.txt", "mine.txt"]);
        assert_eq!(read(&dir, "a.txt"), "edited");
        assert!(!dir.join("b.txt").exists());
        assert_eq!(read(&dir, "jobs/run.sh"), "r2");
        // Nothing to do the third time.
        let third = sync_templates(&dir, &v2).expect("sync");
        assert!(third.written.is_empty());
    }

    #[test]
    fn a_link_in_place_of_a_starter_is_replaced_not_followed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("templates");
        std::fs::create_dir_all(&dir).expect("dir");
        // Elsewhere, a file with exactly the installed contents.
        let outside = tmp.path().join("outside.txt");
        std::fs::write(&outside, "a1").expect("write");
        sync_templates(&dir, &files(&[("a.txt", "a1")])).expect("sync");
        std::fs::remove_file(dir.join("a.txt")).expect("rm");
        std::os::unix::fs::symlink(&outside, dir.join("a.txt")).expect("link");
        let report =
            sync_templates(&dir, &files(&[("a.txt", "a2"), ("../escape.txt", "x")])).expect("sync");
        assert_eq!(report.written, vec!["a.txt"]);
        assert_eq!(std::fs::read_to_string(&outside).expect("read"), "a1");
        let meta = std::fs::symlink_metadata(dir.join("a.txt")).expect("stat");
        assert!(
            meta.file_type().is_file(),
            "the link was replaced by a file"
        );
        assert!(!tmp.path().join("escape.txt").exists());
    }
}

/// The one rule for paths a user names (a TensorBoard log folder, …): a relative path
/// is taken from their home; the result must lie inside their home or one of `roots`
/// (project spaces, data sets), with no `..` and nothing that is not text.
pub fn confine(path: &str, home: &Path, roots: &[PathBuf]) -> Result<PathBuf, String> {
    use std::path::Component;
    let path = path.trim();
    if path.is_empty() {
        return Err("is empty".into());
    }
    if path.contains('\0') || path.chars().any(char::is_control) {
        return Err("contains control characters".into());
    }
    let given = Path::new(path);
    if given
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err("must not contain '..'".into());
    }
    let full = if given.is_absolute() {
        given.to_path_buf()
    } else {
        let rest = given.strip_prefix("~").unwrap_or(given);
        home.join(rest)
    };
    let full: PathBuf = full
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    if full.starts_with(home) || roots.iter().any(|r| full.starts_with(r)) {
        Ok(full)
    } else {
        Err(format!(
            "{} is outside your home and project spaces",
            full.display()
        ))
    }
}

#[cfg(test)]
mod confine_tests {
    use super::*;

    #[test]
    fn paths_stay_in_the_users_roots() {
        let home = Path::new("/home/alice");
        let roots = vec![PathBuf::from("/projects")];
        assert_eq!(
            confine("runs/exp1", home, &roots),
            Ok(PathBuf::from("/home/alice/runs/exp1"))
        );
        assert_eq!(
            confine("~/tb", home, &roots),
            Ok(PathBuf::from("/home/alice/tb"))
        );
        assert_eq!(
            confine("/projects/vision/./logs", home, &roots),
            Ok(PathBuf::from("/projects/vision/logs"))
        );
        assert!(confine("/etc", home, &roots).is_err());
        assert!(confine("/home/alicex/tb", home, &roots).is_err());
        assert!(confine("runs/../../bob", home, &roots).is_err());
        assert!(confine("", home, &roots).is_err());
    }
}
