//! The Files app's rules: which folders a user may browse (their home, the project
//! spaces, the data sets, read-only), how a path they name is bounded and confined,
//! how an upload is taken in pieces (each appended at an offset to a partial file
//! beside its target, then put in place), how a download is read, and which changes
//! are written to the audit log (every one).
//!
//! Every operation is done as the user by `atrium files` (`crate::user_files`), through
//! the privilege boundary; the portal only streams the bytes of a file the user opened.
//!
//! Owns: [`Files`]. Must not touch: HTTP types (the handlers hand it a stream of
//! bytes and get one back), SQL, the switch to the user (`privilege`).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use serde::Serialize;
use utoipa::ToSchema;

use super::{Audit, ServiceError};
use crate::auth::Principal;
use crate::config::StorageConfig;
use crate::identities::{Identities, IdentityError};
use crate::privilege::Identity;
use crate::user_files::{self, Answer, CallError, Op, Refusal, RefusalKind, Request, Root};

/// The longest path a user may name, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;
/// What one write to disk gathers from the network.
const WRITE_BLOCK: usize = 1 << 20;
/// What one read from disk sends: under the portal's fixed mmap threshold (128 KiB,
/// `main.rs`), so its buffer comes from the heap and is used again, and under the
/// 128 KiB the HTTP server keeps of its write buffer between writes. A 1 MiB block was
/// a fresh mapping, faulted in page by page, twice (ours and the server's), for every
/// MiB sent: downloads ran at a third of the speed.
const READ_BLOCK: usize = 64 << 10;
/// How many blocks may wait for the connection (2 MiB).
const READ_AHEAD: usize = 32;

/// One of the folders a user may browse.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RootInfo {
    /// `Home`, `Project space`, `Data sets`.
    pub label: String,
    pub path: String,
    pub read_only: bool,
}

/// One entry of a folder.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EntryInfo {
    pub name: String,
    /// Its full path.
    pub path: String,
    /// `dir`, `file`, `other` (a device, a socket …) or `broken` (a link to nothing).
    pub kind: String,
    /// A symbolic link (`kind` says what it leads to).
    pub link: bool,
    /// Bytes (files only).
    pub size: u64,
    /// Last modification, ms since the epoch (0: unknown).
    pub modified_ms: i64,
}

/// A step of the way from a root to a folder.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Crumb {
    pub name: String,
    pub path: String,
}

/// A folder's entries, folders first, then by name as people read it (`run-2` before
/// `run-10`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Listing {
    /// The folder's real path (links resolved).
    pub path: String,
    /// The folder above, when it is still inside the root.
    pub parent: Option<String>,
    pub read_only: bool,
    /// From the root down to this folder.
    pub breadcrumbs: Vec<Crumb>,
    pub entries: Vec<EntryInfo>,
    /// The folder holds more entries than a listing shows (10,000).
    pub truncated: bool,
}

/// How much of an upload the portal holds.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UploadStatus {
    pub path: String,
    /// Bytes received so far: continue from here.
    pub offset: u64,
    /// A file of that name exists already.
    pub exists: bool,
    /// The largest file accepted, and the most one request may carry, in bytes.
    pub max_file_bytes: u64,
    pub max_chunk_bytes: u64,
}

/// A file opened for a download, as the user.
#[derive(Debug)]
pub struct Download {
    pub file: std::fs::File,
    /// Its real path (links resolved), and whether it lies in a read-only root (a
    /// data set).
    pub path: PathBuf,
    pub read_only: bool,
    pub size: u64,
    /// The file's name, for `Content-Disposition`.
    pub name: String,
    pub modified_ms: i64,
    /// The caller's turn among transfers, held until the last byte is sent.
    permit: Turn,
}

impl Download {
    /// The bytes from `start` to `end` (inclusive), read off the request's threads a
    /// block per blocking call, [`READ_AHEAD`] blocks ahead of the connection. Waiting
    /// for the client holds no thread: a download the client never reads costs a
    /// task and its blocks, not one of the blocking pool's threads (which a few
    /// hundred such downloads would fill, stalling every login and file operation).
    pub fn stream(self, start: u64, end: u64) -> impl Stream<Item = std::io::Result<Bytes>> {
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(READ_AHEAD);
        let file = Arc::new(self.file);
        let permit = self.permit;
        tokio::spawn(async move {
            let _permit = permit;
            let mut at = start;
            while at <= end {
                let want = ((end - at + 1) as usize).min(READ_BLOCK);
                let file = file.clone();
                let read = tokio::task::spawn_blocking(move || read_block(&file, at, want)).await;
                let result = match read {
                    Ok(Ok(block)) => {
                        at += block.len() as u64;
                        Ok(block)
                    }
                    Ok(Err(e)) => Err(e),
                    Err(e) => Err(std::io::Error::other(e)),
                };
                let stop = result.is_err();
                if tx.send(result).await.is_err() || stop {
                    return;
                }
            }
        });
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) })
    }
}

/// Up to `want` bytes of `file` at `at`, read into a buffer's spare capacity (nothing
/// to zero first).
fn read_block(file: &std::fs::File, at: u64, want: usize) -> std::io::Result<Bytes> {
    let mut buf = Vec::with_capacity(want);
    match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), at) {
        Ok(0) => Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the file became shorter while it was sent",
        )),
        Ok(_) => Ok(Bytes::from(buf)),
        Err(e) => Err(e.into()),
    }
}

/// The partial file of an upload, opened as the user at the offset the piece starts.
#[derive(Debug)]
pub struct UploadPiece {
    file: Arc<std::fs::File>,
    offset: u64,
    /// The most bytes this piece may bring.
    limit: u64,
    /// The caller's turn among transfers, held while the piece arrives.
    _permit: Turn,
    /// The user's uid and gid: the bytes are written as theirs would be.
    owner: (u32, u32),
}

impl UploadPiece {
    /// Write `body` at the piece's offset as it arrives (a block at a time, never the
    /// whole piece in memory), and make it durable before answering: the offset
    /// returned is on disk, so an upload resumed after a crash of the machine goes on
    /// from data that is there. What arrived before the body failed (the client went
    /// away) stays written: the upload continues from there.
    pub async fn write_from<S, E>(self, mut body: S) -> Result<u64, ServiceError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let mut at = self.offset;
        let mut taken: u64 = 0;
        let mut block = BytesMut::with_capacity(WRITE_BLOCK);
        let mut failed: Option<ServiceError> = None;
        let mut flushing: Option<Flush> = None;
        while let Some(item) = body.next().await {
            match item {
                Ok(bytes) => {
                    taken += bytes.len() as u64;
                    if taken > self.limit {
                        failed = Some(too_large(self.limit));
                        break;
                    }
                    block.extend_from_slice(&bytes);
                    if block.len() >= WRITE_BLOCK {
                        at = self.write_block(block.split().freeze(), at).await?;
                        self.flush_behind(&mut flushing).await?;
                    }
                }
                Err(e) => {
                    failed = Some(ServiceError::invalid(
                        "body",
                        format!("the upload was interrupted after {taken} bytes ({e}); ask for its offset and continue"),
                    ));
                    break;
                }
            }
        }
        if !block.is_empty() && taken <= self.limit {
            at = self.write_block(block.freeze(), at).await?;
        }
        if let Some(flush) = flushing {
            flushed(flush.await)?;
        }
        flushed(self.sync().await)?;
        match failed {
            Some(e) => Err(e),
            None => Ok(at),
        }
    }

    async fn write_block(&self, block: Bytes, at: u64) -> Result<u64, ServiceError> {
        let file = self.file.clone();
        let len = block.len() as u64;
        let (uid, gid) = self.owner;
        tokio::task::spawn_blocking(move || {
            crate::privilege::write_as_user(uid, gid, || file.write_all_at(&block, at))
        })
        .await
        .map_err(ServiceError::internal)?
        .map_err(write_error)?;
        Ok(at + len)
    }

    /// Send what was written to disk, off the request's threads; its result is taken
    /// with [`flushed`].
    fn sync(&self) -> Flush {
        let file = self.file.clone();
        let (uid, gid) = self.owner;
        tokio::task::spawn_blocking(move || {
            // Delayed allocation: a file system may claim the blocks only now.
            crate::privilege::write_as_user(uid, gid, || file.sync_data())
        })
    }

    /// Keep one sync running while the piece arrives, so the disk writes while the
    /// network brings the rest (otherwise it all waits for the last sync, and the
    /// upload takes the time of the transfer plus the time of the disk).
    async fn flush_behind(&self, flushing: &mut Option<Flush>) -> Result<(), ServiceError> {
        if flushing.as_ref().is_some_and(|f| !f.is_finished()) {
            return Ok(());
        }
        if let Some(done) = flushing.take() {
            flushed(done.await)?;
        }
        *flushing = Some(self.sync());
        Ok(())
    }
}

/// A sync of an upload's file running on the blocking pool.
type Flush = tokio::task::JoinHandle<std::io::Result<()>>;

/// The result of a sync (a network file system may report a full disk or quota only
/// then).
fn flushed(
    result: Result<std::io::Result<()>, tokio::task::JoinError>,
) -> Result<(), ServiceError> {
    result.map_err(ServiceError::internal)?.map_err(write_error)
}

fn write_error(e: std::io::Error) -> ServiceError {
    match e.raw_os_error() {
        Some(code) if code == libc_edquot() => ServiceError::Conflict(
            "over quota: the upload would exceed your disk quota; free some space and continue"
                .into(),
        ),
        Some(code) if code == libc_enospc() => ServiceError::Conflict(
            "no space left: the file system is full; free some space and continue".into(),
        ),
        _ => ServiceError::internal(format!("writing an upload: {e}")),
    }
}

fn libc_enospc() -> i32 {
    rustix::io::Errno::NOSPC.raw_os_error()
}

fn libc_edquot() -> i32 {
    rustix::io::Errno::DQUOT.raw_os_error()
}

fn too_large(limit: u64) -> ServiceError {
    ServiceError::Invalid {
        field: "body",
        message: format!("this piece of the upload may hold at most {limit} bytes"),
    }
}

/// A turn taken from a [`Gate`]: the caller's own and one of everyone's, given back
/// when it drops.
#[derive(Debug)]
struct Turn {
    _user: tokio::sync::OwnedSemaphorePermit,
    _all: tokio::sync::OwnedSemaphorePermit,
}

/// How many of one kind of work (helper operations, or transfers) may be in progress
/// for one user and for everyone together. Beyond either, a request is refused at
/// once (503 with `Retry-After`) rather than queued: what waits holds memory and
/// descriptors, and one user's stalled work must not become everyone's wait.
#[derive(Debug)]
struct Gate {
    what: &'static str,
    per_user: usize,
    all_max: usize,
    all: Arc<tokio::sync::Semaphore>,
    users: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
}

/// Users' entries a gate keeps before it forgets those with nothing in progress.
const GATE_USERS: usize = 1024;

impl Gate {
    fn new(what: &'static str, per_user: usize, all: usize) -> Gate {
        Gate {
            what,
            per_user,
            all_max: all,
            all: Arc::new(tokio::sync::Semaphore::new(all)),
            users: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    fn enter(&self, user: &str) -> Result<Turn, ServiceError> {
        let mine = {
            // Entries are only inserted or dropped whole: a poisoned map is whole.
            let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
            if users.len() >= GATE_USERS && !users.contains_key(user) {
                let per_user = self.per_user;
                users.retain(|_, s| s.available_permits() < per_user);
            }
            users
                .entry(user.to_string())
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.per_user)))
                .clone()
        };
        let user_turn = mine.try_acquire_owned().map_err(|_| {
            ServiceError::Busy(format!(
                "you have {} {} in progress, the most one user may have; try again when one has finished",
                self.per_user, self.what
            ))
        })?;
        let all_turn = self.all.clone().try_acquire_owned().map_err(|_| {
            ServiceError::Busy(format!(
                "the portal has its most {} in progress ({})",
                self.what, self.all_max
            ))
        })?;
        Ok(Turn {
            _user: user_turn,
            _all: all_turn,
        })
    }
}

/// The Files app. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Files {
    identities: Identities,
    audit: Audit,
    storage: Arc<StorageConfig>,
    /// Operations of `atrium files` (listings, changes, opening a file).
    operations: Arc<Gate>,
    /// Downloads being sent and upload pieces being received.
    transfers: Arc<Gate>,
}

impl Files {
    pub fn new(identities: Identities, audit: Audit, storage: StorageConfig) -> Files {
        let per_user = storage.files_per_user;
        let all = storage.files_in_all;
        Files {
            identities,
            audit,
            storage: Arc::new(storage),
            operations: Arc::new(Gate::new("file operations", per_user, all)),
            transfers: Arc::new(Gate::new("downloads and uploads", per_user, all)),
        }
    }

    /// The largest file an upload may make, in bytes.
    pub fn max_file_bytes(&self) -> u64 {
        self.storage.max_upload_mb.saturating_mul(1 << 20)
    }

    /// The most one request of an upload may carry, in bytes.
    pub fn max_chunk_bytes(&self) -> u64 {
        self.storage.max_upload_chunk_mb.saturating_mul(1 << 20)
    }

    /// Who the caller's files are opened as: their POSIX identity; without root, the
    /// portal's own user (a single-user workstation).
    async fn identity(&self, caller: &Principal) -> Result<Identity, ServiceError> {
        if let Some(found) = self.identities.lookup(&caller.username).await? {
            return Ok(found);
        }
        if self.identities.as_root() {
            return Err(IdentityError::Missing(caller.username.clone()).into());
        }
        let (uid, gid) = crate::launch::current_ids();
        Ok(Identity {
            user: caller.username.clone(),
            uid,
            gid,
            groups: Vec::new(),
            home: std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
        })
    }

    fn roots_of(&self, identity: &Identity) -> Vec<Root> {
        let mut roots = vec![Root {
            path: identity.home.clone(),
            read_only: false,
        }];
        roots.extend(self.storage.projects.iter().map(|m| Root {
            path: m.source.clone(),
            read_only: false,
        }));
        roots.extend(self.storage.datasets.iter().map(|m| Root {
            path: m.source.clone(),
            read_only: true,
        }));
        roots
    }

    /// A turn among the caller's file operations, taken before anything else is done
    /// for them (beyond their share a request costs next to nothing), and who they are.
    async fn begin(&self, caller: &Principal) -> Result<(Turn, Identity), ServiceError> {
        let turn = self.operations.enter(&caller.username)?;
        Ok((turn, self.identity(caller).await?))
    }

    /// The folders the caller may browse: their home, the project spaces, the data sets.
    pub async fn roots(&self, caller: &Principal) -> Result<Vec<RootInfo>, ServiceError> {
        let identity = self.identity(caller).await?;
        let mut out = vec![RootInfo {
            label: "Home".into(),
            path: identity.home.display().to_string(),
            read_only: false,
        }];
        out.extend(self.storage.projects.iter().map(|m| RootInfo {
            label: "Project space".into(),
            path: m.source.display().to_string(),
            read_only: false,
        }));
        out.extend(self.storage.datasets.iter().map(|m| RootInfo {
            label: "Data sets".into(),
            path: m.source.display().to_string(),
            read_only: true,
        }));
        Ok(out)
    }

    /// `path` as the user named it, bounded and confined by name to their roots (a
    /// relative path starts at their home). The real check is the user's own, after
    /// the kernel resolved it.
    fn named(
        &self,
        identity: &Identity,
        field: &'static str,
        path: &str,
    ) -> Result<PathBuf, ServiceError> {
        if path.len() > MAX_PATH {
            return Err(ServiceError::Invalid {
                field,
                message: format!("{field} is longer than {MAX_PATH} bytes"),
            });
        }
        let others: Vec<PathBuf> = self.roots_of(identity)[1..]
            .iter()
            .map(|r| r.path.clone())
            .collect();
        crate::homes::confine(path, &identity.home, &others).map_err(|why| ServiceError::Invalid {
            field,
            message: format!("{field} {why}"),
        })
    }

    async fn run(
        &self,
        identity: &Identity,
        op: Op,
    ) -> Result<(Answer, Option<std::fs::File>), ServiceError> {
        let request = Request {
            roots: self.roots_of(identity),
            op,
        };
        let deadline = std::time::Duration::from_secs(self.storage.files_timeout_seconds);
        user_files::call(identity, &request, deadline)
            .await
            .map_err(|e| match e {
                CallError::Refused(r) => refused(r),
                timed_out @ CallError::TimedOut(_) => ServiceError::Busy(format!(
                    "{timed_out} (a slow file system, or the program stopped); try again"
                )),
                CallError::Failed(cause) => ServiceError::internal(cause),
            })
    }

    /// A folder's entries.
    pub async fn list(&self, caller: &Principal, path: &str) -> Result<Listing, ServiceError> {
        let (_turn, identity) = self.begin(caller).await?;
        let named = self.named(&identity, "path", path)?;
        let (answer, _) = self.run(&identity, Op::List { path: named }).await?;
        let Answer::Listing {
            path,
            read_only,
            mut entries,
            truncated,
        } = answer
        else {
            return Err(ServiceError::internal(
                "atrium files answered a listing with something else",
            ));
        };
        entries.sort_by(|a, b| {
            (a.kind != "dir")
                .cmp(&(b.kind != "dir"))
                .then_with(|| natural_order(&a.name, &b.name))
        });
        let roots = self.roots_of(&identity);
        let breadcrumbs = breadcrumbs(&roots, &path);
        let parent = (breadcrumbs.len() > 1)
            .then(|| path.parent().map(|p| p.display().to_string()))
            .flatten();
        Ok(Listing {
            entries: entries
                .into_iter()
                .map(|e| EntryInfo {
                    path: path.join(&e.name).display().to_string(),
                    name: e.name,
                    kind: e.kind,
                    link: e.link,
                    size: e.size,
                    modified_ms: e.modified_ms,
                })
                .collect(),
            path: path.display().to_string(),
            parent,
            read_only,
            breadcrumbs,
            truncated,
        })
    }

    /// Create the folder `path`.
    pub async fn mkdir(
        &self,
        caller: &Principal,
        client_addr: &str,
        path: &str,
    ) -> Result<String, ServiceError> {
        let (_turn, identity) = self.begin(caller).await?;
        let named = self.named(&identity, "path", path)?;
        let done = self.change(&identity, Op::Mkdir { path: named }).await?;
        self.record(
            caller,
            client_addr,
            "file.mkdir",
            &done,
            serde_json::json!({}),
        )
        .await?;
        Ok(done)
    }

    /// Rename (or move) `from` to `to`; `to` must not exist unless `overwrite`.
    pub async fn rename(
        &self,
        caller: &Principal,
        client_addr: &str,
        from: &str,
        to: &str,
        overwrite: bool,
    ) -> Result<String, ServiceError> {
        let (_turn, identity) = self.begin(caller).await?;
        let from_path = self.named(&identity, "from", from)?;
        let to_path = self.named(&identity, "to", to)?;
        let done = self
            .change(
                &identity,
                Op::Rename {
                    from: from_path.clone(),
                    to: to_path,
                    overwrite,
                },
            )
            .await?;
        self.record(
            caller,
            client_addr,
            "file.rename",
            &done,
            serde_json::json!({"before": from_path.display().to_string(), "after": done}),
        )
        .await?;
        Ok(done)
    }

    /// Delete `path`: a file, a link, an empty folder, or any folder when `recursive`.
    pub async fn delete(
        &self,
        caller: &Principal,
        client_addr: &str,
        path: &str,
        recursive: bool,
    ) -> Result<String, ServiceError> {
        let (_turn, identity) = self.begin(caller).await?;
        let named = self.named(&identity, "path", path)?;
        let done = self
            .change(
                &identity,
                Op::Delete {
                    path: named,
                    recursive,
                },
            )
            .await?;
        self.record(
            caller,
            client_addr,
            "file.delete",
            &done,
            serde_json::json!({"recursive": recursive}),
        )
        .await?;
        Ok(done)
    }

    async fn change(&self, identity: &Identity, op: Op) -> Result<String, ServiceError> {
        match self.run(identity, op).await? {
            (Answer::Done { path }, _) => Ok(path.display().to_string()),
            _ => Err(ServiceError::internal(
                "atrium files answered a change with something else",
            )),
        }
    }

    async fn record(
        &self,
        caller: &Principal,
        client_addr: &str,
        action: &str,
        target: &str,
        detail: serde_json::Value,
    ) -> Result<(), ServiceError> {
        self.audit
            .record(&caller.username, client_addr, action, target, detail)
            .await?;
        Ok(())
    }

    /// Open the file `path` for a download.
    pub async fn download(&self, caller: &Principal, path: &str) -> Result<Download, ServiceError> {
        let permit = self.transfers.enter(&caller.username)?;
        let (_turn, identity) = self.begin(caller).await?;
        let named = self.named(&identity, "path", path)?;
        match self.run(&identity, Op::OpenRead { path: named }).await? {
            (
                Answer::Opened {
                    path,
                    size,
                    modified_ms,
                },
                Some(file),
            ) => Ok(Download {
                file,
                size,
                name: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "download".into()),
                read_only: in_read_only_root(&self.roots_of(&identity), &path),
                path,
                modified_ms,
                permit,
            }),
            _ => Err(ServiceError::internal("atrium files opened no file")),
        }
    }

    /// How much of an upload to `path` the portal holds.
    pub async fn upload_status(
        &self,
        caller: &Principal,
        path: &str,
    ) -> Result<UploadStatus, ServiceError> {
        let (_turn, identity) = self.begin(caller).await?;
        let named = self.named(&identity, "path", path)?;
        match self
            .run(
                &identity,
                Op::Status {
                    path: named.clone(),
                },
            )
            .await?
        {
            (Answer::Status { offset, exists }, _) => Ok(UploadStatus {
                path: named.display().to_string(),
                offset,
                exists,
                max_file_bytes: self.max_file_bytes(),
                max_chunk_bytes: self.max_chunk_bytes(),
            }),
            _ => Err(ServiceError::internal(
                "atrium files answered a status with something else",
            )),
        }
    }

    /// Open the partial file of an upload to `path` for a piece starting at `offset`,
    /// of `length` bytes when the request says so.
    pub async fn upload_piece(
        &self,
        caller: &Principal,
        path: &str,
        offset: u64,
        length: Option<u64>,
    ) -> Result<UploadPiece, ServiceError> {
        let max_file = self.max_file_bytes();
        if offset > max_file {
            return Err(ServiceError::Invalid {
                field: "offset",
                message: format!("offset is past the largest file accepted ({max_file} bytes)"),
            });
        }
        let limit = self.max_chunk_bytes().min(max_file - offset);
        if let Some(length) = length {
            if length > limit {
                return Err(if offset.saturating_add(length) > max_file {
                    ServiceError::Invalid {
                        field: "body",
                        message: format!(
                            "the file would be larger than the largest accepted ({max_file} bytes)"
                        ),
                    }
                } else {
                    too_large(limit)
                });
            }
        }
        let permit = self.transfers.enter(&caller.username)?;
        let (_turn, identity) = self.begin(caller).await?;
        let named = self.named(&identity, "path", path)?;
        match self
            .run(
                &identity,
                Op::OpenWrite {
                    path: named,
                    offset,
                },
            )
            .await?
        {
            (Answer::Opened { .. }, Some(file)) => Ok(UploadPiece {
                file: Arc::new(file),
                offset,
                limit,
                _permit: permit,
                owner: (identity.uid, identity.gid),
            }),
            _ => Err(ServiceError::internal("atrium files opened no file")),
        }
    }

    /// Put a finished upload in place as `path` (it must hold `size` bytes when given;
    /// an existing file is replaced only when `overwrite`).
    pub async fn complete_upload(
        &self,
        caller: &Principal,
        client_addr: &str,
        path: &str,
        size: Option<u64>,
        overwrite: bool,
    ) -> Result<String, ServiceError> {
        let (_turn, identity) = self.begin(caller).await?;
        let named = self.named(&identity, "path", path)?;
        let done = self
            .change(
                &identity,
                Op::Complete {
                    path: named,
                    size,
                    overwrite,
                    keep_mode: false,
                    if_modified_ms: None,
                },
            )
            .await?;
        self.record(
            caller,
            client_addr,
            "file.upload",
            &done,
            serde_json::json!({"size": size, "overwrite": overwrite}),
        )
        .await?;
        Ok(done)
    }
}

/// The most of a file the page shows, and the largest file it edits.
pub const MAX_TEXT_BYTES: u64 = 1 << 20;

/// A file as the page shows it: its text when it is text and not too large.
#[derive(Debug, Clone)]
pub struct TextFile {
    /// Its real path.
    pub path: String,
    pub name: String,
    pub size: u64,
    pub modified_ms: i64,
    /// Its text (UTF-8, no NUL); `None` for a binary file or one over
    /// [`MAX_TEXT_BYTES`].
    pub text: Option<String>,
    /// In a data set: it may be read, not changed.
    pub read_only: bool,
}

impl Files {
    /// The file `path` for viewing: its text when it is text of at most
    /// [`MAX_TEXT_BYTES`] (read as the user).
    pub async fn read_text(
        &self,
        caller: &Principal,
        path: &str,
    ) -> Result<TextFile, ServiceError> {
        let Download {
            file,
            path,
            read_only,
            size,
            name,
            modified_ms,
            ..
        } = self.download(caller, path).await?;
        let text = if size <= MAX_TEXT_BYTES {
            tokio::task::spawn_blocking(move || {
                let mut bytes = Vec::with_capacity(size as usize);
                std::io::Read::read_to_end(
                    &mut std::io::Read::take(&file, MAX_TEXT_BYTES + 1),
                    &mut bytes,
                )
                .ok()?;
                if bytes.contains(&0) {
                    return None;
                }
                String::from_utf8(bytes).ok()
            })
            .await
            .map_err(|e| ServiceError::internal(e.to_string()))?
        } else {
            None
        };
        Ok(TextFile {
            path: path.display().to_string(),
            name,
            size,
            modified_ms,
            text,
            read_only,
        })
    }

    /// Save `text` as the file `path` (as the user: a new file, or in place of the
    /// one there, keeping its permissions), only if it was last modified at
    /// `opened_ms` when given: the file changed since it was opened is a conflict,
    /// and nothing is written over it. Audited as `file.edit`.
    pub async fn save_text(
        &self,
        caller: &Principal,
        client_addr: &str,
        path: &str,
        text: &str,
        opened_ms: Option<i64>,
    ) -> Result<String, ServiceError> {
        let len = text.len() as u64;
        if len > MAX_TEXT_BYTES {
            return Err(ServiceError::Invalid {
                field: "text",
                message: format!("the page edits files of at most {MAX_TEXT_BYTES} bytes"),
            });
        }
        let piece = self.upload_piece(caller, path, 0, Some(len)).await?;
        let body = futures_util::stream::iter([Ok::<Bytes, std::convert::Infallible>(
            Bytes::copy_from_slice(text.as_bytes()),
        )]);
        piece.write_from(body).await?;
        let (_turn, identity) = self.begin(caller).await?;
        let named = self.named(&identity, "path", path)?;
        let done = self
            .change(
                &identity,
                Op::Complete {
                    path: named,
                    size: Some(len),
                    overwrite: true,
                    keep_mode: true,
                    if_modified_ms: opened_ms,
                },
            )
            .await?;
        self.record(
            caller,
            client_addr,
            "file.edit",
            &done,
            serde_json::json!({"size": len}),
        )
        .await?;
        Ok(done)
    }
}

/// Names as people read them: `slurm-2.out` before `slurm-10.out`, any case.
pub fn natural_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> impl Iterator<Item = (bool, &str)> {
        let mut rest = s;
        std::iter::from_fn(move || {
            let first = rest.chars().next()?;
            let digit = first.is_ascii_digit();
            let end = rest
                .char_indices()
                .find(|(_, c)| c.is_ascii_digit() != digit)
                .map_or(rest.len(), |(i, _)| i);
            let (chunk, after) = rest.split_at(end);
            rest = after;
            Some((digit, chunk))
        })
    }
    let mut x = chunks(a);
    let mut y = chunks(b);
    loop {
        match (x.next(), y.next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some((true, p)), Some((true, q))) => {
                let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                let o = p.len().cmp(&q.len()).then_with(|| p.cmp(q));
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            (Some((_, p)), Some((_, q))) => {
                let o = p.to_lowercase().cmp(&q.to_lowercase());
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

/// What the user hears of a refusal by `atrium files`.
fn refused(r: Refusal) -> ServiceError {
    match r.kind {
        RefusalKind::Invalid => ServiceError::Invalid {
            field: field_name(&r.field),
            message: r.message,
        },
        RefusalKind::Forbidden | RefusalKind::ReadOnly => ServiceError::Forbidden(r.message),
        // A missing file is named in the message: the user asked for it by path.
        RefusalKind::NotFound => ServiceError::Invalid {
            field: field_name(&r.field),
            message: r.message,
        },
        RefusalKind::Conflict => ServiceError::Conflict(r.message),
    }
}

fn field_name(field: &str) -> &'static str {
    match field {
        "from" => "from",
        "to" => "to",
        "offset" => "offset",
        "size" => "size",
        _ => "path",
    }
}

/// Whether the real path `real` lies in a read-only root (a data set).
fn in_read_only_root(roots: &[Root], real: &Path) -> bool {
    roots.iter().filter(|r| r.read_only).any(|r| {
        let base = std::fs::canonicalize(&r.path).unwrap_or_else(|_| r.path.clone());
        real.starts_with(base)
    })
}

/// The way from the root `real` lies in down to it.
fn breadcrumbs(roots: &[Root], real: &Path) -> Vec<Crumb> {
    let root = roots
        .iter()
        .filter_map(|r| {
            let base = std::fs::canonicalize(&r.path).unwrap_or_else(|_| r.path.clone());
            real.starts_with(&base).then_some(base)
        })
        .max_by_key(|b| b.as_os_str().len());
    let Some(root) = root else {
        return vec![Crumb {
            name: real.display().to_string(),
            path: real.display().to_string(),
        }];
    };
    let mut crumbs = vec![Crumb {
        name: root.display().to_string(),
        path: root.display().to_string(),
    }];
    let mut at = root.clone();
    if let Ok(rest) = real.strip_prefix(&root) {
        for part in rest.components() {
            at.push(part);
            crumbs.push(Crumb {
                name: part.as_os_str().to_string_lossy().into_owned(),
                path: at.display().to_string(),
            });
        }
    }
    crumbs
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_sort_as_people_read_them() {
        let mut names = vec![
            "slurm-10.out",
            "slurm-2.out",
            "Data",
            "alpha",
            "slurm-02b",
            "run1",
            "run01",
        ];
        names.sort_by(|a, b| super::natural_order(a, b));
        assert_eq!(
            names,
            [
                "alpha",
                "Data",
                "run01",
                "run1",
                "slurm-2.out",
                "slurm-02b",
                "slurm-10.out"
            ]
        );
    }

    use super::*;

    /// Bytes that differ from block to block, so a block out of place shows.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    fn download_of(bytes: &[u8]) -> Download {
        let mut file = tempfile::tempfile().expect("a temporary file");
        std::io::Write::write_all(&mut file, bytes).expect("written");
        Download {
            file,
            path: PathBuf::from("/data.bin"),
            read_only: false,
            size: bytes.len() as u64,
            name: "data.bin".into(),
            modified_ms: 0,
            permit: Gate::new("downloads", 1, 1).enter("test").expect("a turn"),
        }
    }

    async fn sent(download: Download, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
        let mut stream = Box::pin(download.stream(start, end));
        let mut out = Vec::new();
        while let Some(block) = stream.next().await {
            let block = block?;
            assert!(block.len() <= READ_BLOCK, "a block of {}", block.len());
            out.extend_from_slice(&block);
        }
        Ok(out)
    }

    #[test]
    fn a_gate_refuses_beyond_each_users_share_and_beyond_everyones() {
        let gate = Gate::new("downloads", 2, 3);
        let a1 = gate.enter("alice").expect("alice's first");
        let _a2 = gate.enter("alice").expect("alice's second");
        assert!(matches!(gate.enter("alice"), Err(ServiceError::Busy(_))));
        let _b1 = gate.enter("bob").expect("bob's first");
        assert!(
            matches!(gate.enter("carol"), Err(ServiceError::Busy(_))),
            "everyone's share is taken"
        );
        drop(a1);
        let _c1 = gate.enter("carol").expect("a turn given back");
    }

    #[tokio::test]
    async fn a_download_sends_the_range_asked_for_in_small_blocks() {
        let data = pattern(5 * READ_BLOCK + 123);
        let whole = sent(download_of(&data), 0, data.len() as u64 - 1).await;
        assert_eq!(whole.expect("sent"), data);
        let (start, end) = (READ_BLOCK as u64 - 7, 3 * READ_BLOCK as u64 + 9);
        let part = sent(download_of(&data), start, end).await;
        assert_eq!(part.expect("sent"), &data[start as usize..=end as usize]);
    }

    #[tokio::test]
    async fn a_file_that_shrank_while_sent_ends_the_download_with_an_error() {
        let data = pattern(2 * READ_BLOCK);
        let download = download_of(&data);
        download.file.set_len(READ_BLOCK as u64).expect("cut");
        let err = sent(download, 0, data.len() as u64 - 1)
            .await
            .expect_err("a download of a file that shrank");
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    }

    fn piece_at(file: &std::fs::File, offset: u64, limit: u64) -> UploadPiece {
        UploadPiece {
            file: Arc::new(file.try_clone().expect("a second descriptor")),
            offset,
            limit,
            _permit: Gate::new("uploads", 1, 1).enter("test").expect("a turn"),
            owner: crate::launch::current_ids(),
        }
    }

    fn body_of(
        data: &[u8],
        cut: usize,
    ) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
        let pieces: Vec<_> = data
            .chunks(cut)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures_util::stream::iter(pieces)
    }

    #[tokio::test]
    async fn a_piece_is_written_at_its_offset_across_many_blocks() {
        let file = tempfile::tempfile().expect("a temporary file");
        let first = pattern(1000);
        let rest = pattern(3 * WRITE_BLOCK + 4321);
        let at = piece_at(&file, 0, u64::MAX)
            .write_from(body_of(&first, 100))
            .await
            .expect("first piece");
        assert_eq!(at, 1000);
        // Pieces of the body of the size a socket hands over, crossing the blocks.
        let at = piece_at(&file, at, u64::MAX)
            .write_from(body_of(&rest, 65_537))
            .await
            .expect("second piece");
        assert_eq!(at, 1000 + rest.len() as u64);
        let mut on_disk = Vec::new();
        std::io::Read::read_to_end(&mut &file, &mut on_disk).expect("read back");
        assert_eq!(on_disk.len(), first.len() + rest.len());
        assert!(on_disk[..1000] == first[..] && on_disk[1000..] == rest[..]);
    }

    #[tokio::test]
    async fn a_piece_over_its_limit_is_refused_naming_the_body() {
        let file = tempfile::tempfile().expect("a temporary file");
        let data = pattern(2 * WRITE_BLOCK);
        let err = piece_at(&file, 0, WRITE_BLOCK as u64 + 10)
            .write_from(body_of(&data, 4096))
            .await
            .expect_err("a piece over its limit");
        assert!(
            matches!(err, ServiceError::Invalid { field: "body", .. }),
            "{err:?}"
        );
    }

    #[test]
    fn breadcrumbs_start_at_the_innermost_root() {
        let roots = vec![
            Root {
                path: "/nonexistent-home/alice".into(),
                read_only: false,
            },
            Root {
                path: "/nonexistent-projects".into(),
                read_only: false,
            },
        ];
        let crumbs = breadcrumbs(&roots, Path::new("/nonexistent-home/alice/runs/exp1"));
        let names: Vec<_> = crumbs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["/nonexistent-home/alice", "runs", "exp1"]);
        assert_eq!(crumbs[2].path, "/nonexistent-home/alice/runs/exp1");
    }

    #[test]
    fn refusals_name_their_field() {
        let e = refused(Refusal {
            kind: RefusalKind::Invalid,
            field: "to".into(),
            message: "to x leads outside".into(),
        });
        assert!(
            matches!(e, ServiceError::Invalid { field: "to", .. }),
            "{e:?}"
        );
        let e = refused(Refusal {
            kind: RefusalKind::ReadOnly,
            field: "path".into(),
            message: "read-only".into(),
        });
        assert!(matches!(e, ServiceError::Forbidden(_)));
    }
}
