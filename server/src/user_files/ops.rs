//! The operations of `atrium files`, run as the user. Each opens what it works on
//! first (following links, with the user's permissions), reads its real path back
//! from `/proc/self/fd`, checks that path against the roots, and works relative to the
//! open directory from then on.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{
    fstat, ftruncate, mkdirat, openat, renameat_with, statat, unlinkat, AtFlags, FileType, Mode,
    OFlags, RenameFlags, CWD,
};
use rustix::io::Errno;

use super::{Answer, Entry, Op, Refusal, RefusalKind, Request, Root};

/// The most entries a listing returns.
pub const MAX_ENTRIES: usize = 10_000;
/// The longest name of an entry, in bytes (Linux's `NAME_MAX`).
pub const MAX_NAME: usize = 255;
/// What the partial file of an upload is called, beside its target.
const PARTIAL_PREFIX: &str = ".";
const PARTIAL_SUFFIX: &str = ".atrium-partial";

/// The partial file's name for an upload named `name`.
pub fn partial_name(name: &str) -> String {
    format!("{PARTIAL_PREFIX}{name}{PARTIAL_SUFFIX}")
}

fn refuse(kind: RefusalKind, field: &str, message: impl Into<String>) -> Refusal {
    Refusal {
        kind,
        field: field.to_string(),
        message: message.into(),
    }
}

/// A failed system call on `path` (named by `field`), in the user's words.
fn failure(errno: Errno, field: &str, path: &Path) -> Refusal {
    let shown = path.display();
    match errno {
        Errno::ACCESS | Errno::PERM => refuse(
            RefusalKind::Forbidden,
            field,
            format!("{field} {shown}: permission denied"),
        ),
        Errno::NOENT => refuse(
            RefusalKind::NotFound,
            field,
            format!("{field} {shown} does not exist"),
        ),
        Errno::NOTDIR => refuse(
            RefusalKind::Invalid,
            field,
            format!("{field} {shown}: a part of it is not a folder"),
        ),
        Errno::EXIST => refuse(
            RefusalKind::Conflict,
            field,
            format!("{field} {shown} already exists"),
        ),
        Errno::NOTEMPTY => refuse(
            RefusalKind::Conflict,
            field,
            format!("{field} {shown} is a folder that is not empty"),
        ),
        Errno::ISDIR => refuse(
            RefusalKind::Invalid,
            field,
            format!("{field} {shown} is a folder"),
        ),
        Errno::LOOP => refuse(
            RefusalKind::Invalid,
            field,
            format!("{field} {shown}: too many levels of links"),
        ),
        Errno::NAMETOOLONG => refuse(
            RefusalKind::Invalid,
            field,
            format!("{field} {shown}: name too long"),
        ),
        Errno::ROFS => refuse(
            RefusalKind::ReadOnly,
            field,
            format!("{field} {shown} is on a read-only file system"),
        ),
        Errno::XDEV => refuse(
            RefusalKind::Invalid,
            field,
            format!("{field} {shown}: cannot move across file systems"),
        ),
        Errno::NOSPC | Errno::DQUOT => refuse(
            RefusalKind::Conflict,
            field,
            format!("{field} {shown}: no space left (disk full or over quota)"),
        ),
        other => refuse(
            RefusalKind::Invalid,
            field,
            format!("{field} {shown}: {}", std::io::Error::from(other)),
        ),
    }
}

/// The roots as the kernel resolves them for this user (those it cannot reach are
/// left out), longest first so the innermost root decides.
fn real_roots(roots: &[Root]) -> Vec<Root> {
    let mut real: Vec<Root> = roots
        .iter()
        .filter_map(|r| {
            std::fs::canonicalize(&r.path).ok().map(|path| Root {
                path,
                read_only: r.read_only,
            })
        })
        .collect();
    real.sort_by_key(|r| std::cmp::Reverse(r.path.as_os_str().len()));
    real
}

/// The root `real` lies in (itself or below).
fn root_of<'a>(roots: &'a [Root], real: &Path) -> Option<&'a Root> {
    roots.iter().find(|r| real.starts_with(&r.path))
}

/// An open descriptor's real path.
fn real_path(fd: &OwnedFd) -> std::io::Result<PathBuf> {
    std::fs::read_link(proc_path(fd))
}

/// The descriptor as a path (`/proc/self/fd/N`): what `std::fs` reaches through it.
fn proc_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// A folder opened as the user, inside the roots.
struct Dir {
    fd: OwnedFd,
    real: PathBuf,
    read_only: bool,
}

/// Open `path` as a folder and confine it.
fn open_dir(roots: &[Root], path: &Path, field: &str) -> Result<Dir, Refusal> {
    let fd = openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| failure(e, field, path))?;
    let real = real_path(&fd).map_err(|e| {
        refuse(
            RefusalKind::Invalid,
            field,
            format!("{field} {}: {e}", path.display()),
        )
    })?;
    let root = root_of(roots, &real).ok_or_else(|| outside(field, path))?;
    Ok(Dir {
        fd,
        read_only: root.read_only,
        real,
    })
}

fn outside(field: &str, path: &Path) -> Refusal {
    refuse(
        RefusalKind::Invalid,
        field,
        format!(
            "{field} {} leads outside your home, project and data set folders",
            path.display()
        ),
    )
}

/// `path`'s folder, opened and confined, and its last name: what a change works on.
fn open_parent(roots: &[Root], path: &Path, field: &str) -> Result<(Dir, String), Refusal> {
    let name = match path.components().next_back() {
        Some(Component::Normal(name)) => name,
        _ => {
            return Err(refuse(
                RefusalKind::Invalid,
                field,
                format!("{field} {} does not name a file or folder", path.display()),
            ))
        }
    };
    let name = checked_name(name, field)?;
    let parent = path.parent().unwrap_or(Path::new("/"));
    let dir = open_dir(roots, parent, field)?;
    Ok((dir, name))
}

fn checked_name(name: &OsStr, field: &str) -> Result<String, Refusal> {
    let text = name.to_str().ok_or_else(|| {
        refuse(
            RefusalKind::Invalid,
            field,
            format!("{field}: the name is not UTF-8"),
        )
    })?;
    if text.len() > MAX_NAME {
        return Err(refuse(
            RefusalKind::Invalid,
            field,
            format!("{field}: a name is at most {MAX_NAME} bytes"),
        ));
    }
    Ok(text.to_string())
}

/// Refuse a change in a read-only root.
fn writable(dir: &Dir, field: &str) -> Result<(), Refusal> {
    if dir.read_only {
        return Err(refuse(
            RefusalKind::ReadOnly,
            field,
            format!(
                "{field} {} is in a data set, which is read-only",
                dir.real.display()
            ),
        ));
    }
    Ok(())
}

/// Perform one request; the descriptor of the file an open operation opened.
pub fn perform(request: &Request) -> Result<(Answer, Option<OwnedFd>), Refusal> {
    let roots = real_roots(&request.roots);
    match &request.op {
        Op::List { path } => list(&roots, path).map(|a| (a, None)),
        Op::Mkdir { path } => {
            let (dir, name) = open_parent(&roots, path, "path")?;
            writable(&dir, "path")?;
            mkdirat(&dir.fd, name.as_str(), Mode::from_raw_mode(0o777))
                .map_err(|e| failure(e, "path", path))?;
            Ok((
                Answer::Done {
                    path: dir.real.join(name),
                },
                None,
            ))
        }
        Op::Rename {
            from,
            to,
            overwrite,
        } => {
            let (from_dir, from_name) = open_parent(&roots, from, "from")?;
            writable(&from_dir, "from")?;
            let (to_dir, to_name) = open_parent(&roots, to, "to")?;
            writable(&to_dir, "to")?;
            let flags = if *overwrite {
                RenameFlags::empty()
            } else {
                RenameFlags::NOREPLACE
            };
            rename(&from_dir, &from_name, &to_dir, &to_name, flags, (from, to))?;
            Ok((
                Answer::Done {
                    path: to_dir.real.join(to_name),
                },
                None,
            ))
        }
        Op::Delete { path, recursive } => {
            let (dir, name) = open_parent(&roots, path, "path")?;
            writable(&dir, "path")?;
            delete(&dir, &name, *recursive, path)?;
            Ok((
                Answer::Done {
                    path: dir.real.join(name),
                },
                None,
            ))
        }
        Op::OpenRead { path } => open_read(&roots, path).map(|(a, fd)| (a, Some(fd))),
        Op::OpenWrite { path, offset } => {
            open_write(&roots, path, *offset).map(|(a, fd)| (a, Some(fd)))
        }
        Op::Status { path } => {
            let (dir, name) = open_parent(&roots, path, "path")?;
            let offset = match statat(&dir.fd, partial_name(&name), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                    st.st_size as u64
                }
                _ => 0,
            };
            let exists = statat(&dir.fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok();
            Ok((Answer::Status { offset, exists }, None))
        }
        Op::Complete {
            path,
            size,
            overwrite,
            keep_mode,
            if_modified_ms,
        } => {
            let (dir, name) = open_parent(&roots, path, "path")?;
            writable(&dir, "path")?;
            let partial = partial_name(&name);
            let st = statat(&dir.fd, partial.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(|e| {
                if e == Errno::NOENT {
                    refuse(
                        RefusalKind::NotFound,
                        "path",
                        format!("path {}: nothing was uploaded for it", path.display()),
                    )
                } else {
                    failure(e, "path", path)
                }
            })?;
            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                return Err(refuse(
                    RefusalKind::Invalid,
                    "path",
                    format!("path {}: the partial upload is not a file", path.display()),
                ));
            }
            let held = st.st_size as u64;
            if let Some(size) = size {
                if *size != held {
                    return Err(refuse(
                        RefusalKind::Conflict,
                        "size",
                        format!("size: the upload holds {held} bytes, not {size}"),
                    ));
                }
            }
            let target = statat(&dir.fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).ok();
            if let Some(expected) = if_modified_ms {
                let now = target.as_ref().map(|t| {
                    t.st_mtime.saturating_mul(1000) + (t.st_mtime_nsec / 1_000_000) as i64
                });
                if now != Some(*expected) {
                    return Err(refuse(
                        RefusalKind::Conflict,
                        "path",
                        format!(
                            "path {}: the file changed since it was opened (or is gone)",
                            path.display()
                        ),
                    ));
                }
            }
            if *keep_mode {
                if let Some(t) = target
                    .as_ref()
                    .filter(|t| FileType::from_raw_mode(t.st_mode) == FileType::RegularFile)
                {
                    let mode = Mode::from_raw_mode(t.st_mode & 0o777);
                    rustix::fs::chmodat(&dir.fd, partial.as_str(), mode, AtFlags::empty())
                        .map_err(|e| failure(e, "path", path))?;
                }
            }
            let flags = if *overwrite {
                RenameFlags::empty()
            } else {
                RenameFlags::NOREPLACE
            };
            rename(
                &dir,
                &partial,
                &dir,
                &name,
                flags,
                (path.as_path(), path.as_path()),
            )
            .map_err(|mut r| {
                r.field = "path".into();
                r
            })?;
            // The pieces are on disk already (the portal syncs each); this makes the
            // new name durable too before the upload is acknowledged.
            rustix::fs::fsync(&dir.fd).map_err(|e| failure(e, "path", path))?;
            Ok((
                Answer::Done {
                    path: dir.real.join(name),
                },
                None,
            ))
        }
    }
}

fn list(roots: &[Root], path: &Path) -> Result<Answer, Refusal> {
    let dir = open_dir(roots, path, "path")?;
    let read = std::fs::read_dir(proc_path(&dir.fd))
        .map_err(|e| failure(Errno::from_io_error(&e).unwrap_or(Errno::IO), "path", path))?;
    let mut entries = Vec::new();
    let mut truncated = false;
    for item in read {
        let Ok(item) = item else { continue };
        if entries.len() >= MAX_ENTRIES {
            truncated = true;
            break;
        }
        let name = item.file_name().to_string_lossy().into_owned();
        let Ok(meta) = std::fs::symlink_metadata(item.path()) else {
            continue;
        };
        let link = meta.file_type().is_symlink();
        let target = if link {
            std::fs::metadata(item.path()).ok()
        } else {
            Some(meta)
        };
        let (kind, size, modified_ms) = match &target {
            Some(m) => (
                if m.is_dir() {
                    "dir"
                } else if m.is_file() {
                    "file"
                } else {
                    "other"
                },
                if m.is_file() { m.len() } else { 0 },
                modified_ms(m),
            ),
            None => ("broken", 0, 0),
        };
        entries.push(Entry {
            name,
            kind: kind.to_string(),
            link,
            size,
            modified_ms,
        });
    }
    Ok(Answer::Listing {
        path: dir.real,
        read_only: dir.read_only,
        entries,
        truncated,
    })
}

fn modified_ms(m: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    m.mtime() * 1000 + m.mtime_nsec() / 1_000_000
}

fn rename(
    from_dir: &Dir,
    from_name: &str,
    to_dir: &Dir,
    to_name: &str,
    flags: RenameFlags,
    (from, to): (&Path, &Path),
) -> Result<(), Refusal> {
    match renameat_with(&from_dir.fd, from_name, &to_dir.fd, to_name, flags) {
        Ok(()) => Ok(()),
        // A file system without RENAME_NOREPLACE (some network ones): look, then rename.
        Err(Errno::INVAL) if flags.contains(RenameFlags::NOREPLACE) => {
            if statat(&to_dir.fd, to_name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                return Err(failure(Errno::EXIST, "to", to));
            }
            renameat_with(
                &from_dir.fd,
                from_name,
                &to_dir.fd,
                to_name,
                RenameFlags::empty(),
            )
            .map_err(|e| failure(e, "from", from))
        }
        Err(Errno::EXIST) => Err(failure(Errno::EXIST, "to", to)),
        Err(e @ (Errno::NOENT | Errno::ACCESS | Errno::PERM)) => Err(failure(e, "from", from)),
        Err(e) => Err(failure(e, "to", to)),
    }
}

fn delete(dir: &Dir, name: &str, recursive: bool, path: &Path) -> Result<(), Refusal> {
    let st =
        statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| failure(e, "path", path))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return unlinkat(&dir.fd, name, AtFlags::empty()).map_err(|e| failure(e, "path", path));
    }
    if !recursive {
        return unlinkat(&dir.fd, name, AtFlags::REMOVEDIR).map_err(|e| failure(e, "path", path));
    }
    // Through the open folder: std's removal opens each level relative to the last and
    // never follows a link (it removes the link).
    std::fs::remove_dir_all(proc_path(&dir.fd).join(name))
        .map_err(|e| failure(Errno::from_io_error(&e).unwrap_or(Errno::IO), "path", path))
}

fn open_read(roots: &[Root], path: &Path) -> Result<(Answer, OwnedFd), Refusal> {
    // Non-blocking: a FIFO planted in place of the file must not hang the open.
    let fd = openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| failure(e, "path", path))?;
    let st = fstat(&fd).map_err(|e| failure(e, "path", path))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(refuse(
            RefusalKind::Invalid,
            "path",
            format!("path {} is not a file", path.display()),
        ));
    }
    let real = real_path(&fd).map_err(|e| {
        refuse(
            RefusalKind::Invalid,
            "path",
            format!("path {}: {e}", path.display()),
        )
    })?;
    if root_of(roots, &real).is_none() {
        return Err(outside("path", path));
    }
    rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(|e| failure(e, "path", path))?;
    Ok((
        Answer::Opened {
            path: real,
            size: st.st_size as u64,
            modified_ms: st.st_mtime * 1000 + (st.st_mtime_nsec / 1_000_000) as i64,
        },
        fd,
    ))
}

fn open_write(roots: &[Root], path: &Path, offset: u64) -> Result<(Answer, OwnedFd), Refusal> {
    let (dir, name) = open_parent(roots, path, "path")?;
    writable(&dir, "path")?;
    if let Ok(st) = statat(&dir.fd, name.as_str(), AtFlags::empty()) {
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            return Err(failure(Errno::ISDIR, "path", path));
        }
    }
    let partial = partial_name(&name);
    if partial.len() > MAX_NAME {
        return Err(failure(Errno::NAMETOOLONG, "path", path));
    }
    let mut flags = OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    if offset == 0 {
        flags |= OFlags::CREATE;
    }
    let fd = openat(&dir.fd, partial.as_str(), flags, Mode::from_raw_mode(0o666)).map_err(|e| {
        if e == Errno::NOENT {
            refuse(
                RefusalKind::Conflict,
                "offset",
                format!(
                    "offset: nothing was uploaded for {} yet; start at 0",
                    path.display()
                ),
            )
        } else {
            failure(e, "path", path)
        }
    })?;
    let st = fstat(&fd).map_err(|e| failure(e, "path", path))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(refuse(
            RefusalKind::Invalid,
            "path",
            format!("path {}: the partial upload is not a file", path.display()),
        ));
    }
    let held = st.st_size as u64;
    if offset > held {
        return Err(refuse(
            RefusalKind::Conflict,
            "offset",
            format!("offset: the server holds {held} bytes of this upload; continue from there"),
        ));
    }
    if offset < held {
        ftruncate(&fd, offset).map_err(|e| failure(e, "path", path))?;
    }
    rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(|e| failure(e, "path", path))?;
    // Positioned where the piece goes, for a writer that does not give the offset.
    rustix::fs::seek(&fd, rustix::fs::SeekFrom::Start(offset))
        .map_err(|e| failure(e, "path", path))?;
    Ok((
        Answer::Opened {
            path: dir.real.join(partial),
            size: offset,
            modified_ms: 0,
        },
        fd,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(dir: &Path, data: &Path) -> Vec<Root> {
        vec![
            Root {
                path: dir.to_path_buf(),
                read_only: false,
            },
            Root {
                path: data.to_path_buf(),
                read_only: true,
            },
        ]
    }

    fn run(roots: &[Root], op: Op) -> Result<Answer, Refusal> {
        perform(&Request {
            roots: roots.to_vec(),
            op,
        })
        .map(|(a, _)| a)
    }

    #[test]
    fn changes_stay_inside_the_writable_roots() {
        let tmp = tempfile::tempdir().expect("tmp");
        let home = tmp.path().join("home");
        let data = tmp.path().join("data");
        let elsewhere = tmp.path().join("elsewhere");
        for d in [&home, &data, &elsewhere] {
            std::fs::create_dir(d).expect("dir");
        }
        std::fs::write(data.join("set.csv"), "1,2").expect("write");
        std::fs::write(elsewhere.join("secret"), "s").expect("write");
        std::os::unix::fs::symlink(&elsewhere, home.join("out")).expect("link");
        let roots = roots(&home, &data);

        run(
            &roots,
            Op::Mkdir {
                path: home.join("a"),
            },
        )
        .expect("mkdir");
        assert!(home.join("a").is_dir());
        let e = run(
            &roots,
            Op::Mkdir {
                path: home.join("out/b"),
            },
        )
        .expect_err("escape");
        assert_eq!(e.kind, RefusalKind::Invalid);
        assert!(!elsewhere.join("b").exists());
        let e = run(
            &roots,
            Op::List {
                path: home.join("out"),
            },
        )
        .expect_err("escape");
        assert!(e.message.contains("outside"), "{e:?}");
        let e = run(
            &roots,
            Op::OpenRead {
                path: home.join("out/secret"),
            },
        )
        .expect_err("escape");
        assert_eq!(e.field, "path");
        let e = run(
            &roots,
            Op::Delete {
                path: data.join("set.csv"),
                recursive: false,
            },
        )
        .expect_err("read-only");
        assert_eq!(e.kind, RefusalKind::ReadOnly);
        assert!(data.join("set.csv").exists());
        // Deleting the link removes the link, not what it leads to.
        run(
            &roots,
            Op::Delete {
                path: home.join("out"),
                recursive: true,
            },
        )
        .expect("delete");
        assert!(elsewhere.join("secret").exists());
        // A root itself cannot be removed: its folder is outside.
        let e = run(
            &roots,
            Op::Delete {
                path: home.clone(),
                recursive: true,
            },
        )
        .expect_err("root");
        assert_eq!(e.kind, RefusalKind::Invalid);
    }

    #[test]
    fn an_upload_continues_and_is_put_in_place() {
        use std::io::Write;
        let tmp = tempfile::tempdir().expect("tmp");
        let home = tmp.path().join("home");
        std::fs::create_dir(&home).expect("dir");
        let roots = roots(&home, &tmp.path().join("none"));
        let target = home.join("big.bin");
        let (_, fd) = open_write(&roots, &target, 0).expect("open");
        std::fs::File::from(fd).write_all(b"hello ").expect("write");
        match run(
            &roots,
            Op::Status {
                path: target.clone(),
            },
        )
        .expect("status")
        {
            Answer::Status { offset, exists } => assert_eq!((offset, exists), (6, false)),
            other => panic!("{other:?}"),
        }
        let e = open_write(&roots, &target, 7).expect_err("past the end");
        assert_eq!(e.field, "offset");
        let (_, fd) = open_write(&roots, &target, 6).expect("open");
        std::fs::File::from(fd).write_all(b"world").expect("write");
        let e = run(
            &roots,
            Op::Complete {
                path: target.clone(),
                size: Some(5),
                overwrite: false,
                keep_mode: false,
                if_modified_ms: None,
            },
        )
        .expect_err("size");
        assert_eq!(e.field, "size");
        run(
            &roots,
            Op::Complete {
                path: target.clone(),
                size: Some(11),
                overwrite: false,
                keep_mode: false,
                if_modified_ms: None,
            },
        )
        .expect("complete");
        assert_eq!(
            std::fs::read_to_string(&target).expect("read"),
            "hello world"
        );
        assert!(!home.join(partial_name("big.bin")).exists());

        // An edit: in place of the file, keeping its mode, only if unchanged since.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o750)).expect("chmod");
        let opened = modified_ms(&std::fs::metadata(&target).expect("stat"));
        let edit = |if_modified_ms: Option<i64>| {
            let (_, fd) = open_write(&roots, &target, 0).expect("open");
            std::fs::File::from(fd).write_all(b"bye").expect("write");
            run(
                &roots,
                Op::Complete {
                    path: target.clone(),
                    size: Some(3),
                    overwrite: true,
                    keep_mode: true,
                    if_modified_ms,
                },
            )
        };
        let e = edit(Some(opened - 1000)).expect_err("changed since");
        assert_eq!(e.kind, RefusalKind::Conflict);
        assert_eq!(
            std::fs::read_to_string(&target).expect("read"),
            "hello world"
        );
        edit(Some(opened)).expect("saved");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "bye");
        let mode = std::fs::metadata(&target)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750, "the edited file keeps its mode");
    }
}
