//! Files as their user: the `atrium files` program, which the portal runs through the
//! privilege boundary ([`crate::privilege::UserCommand`]) to list, create, rename,
//! delete and open a user's files with the user's own uid, gid and groups, and the
//! portal's side of its protocol ([`call`]).
//!
//! The request (the user's roots, read-only or not, and one operation) goes to the
//! program's standard input as JSON; its answer comes back on its standard output,
//! which is one end of a Unix socket pair. To open a file (a download, or the partial
//! file an upload chunk is written into) the program opens it as the user and passes
//! the open descriptor back with the answer (`SCM_RIGHTS`): the portal streams the
//! bytes itself, with no pipe copy, and never opens a user's file by name as root.
//!
//! Confinement happens in the program, after the kernel resolved the path as the
//! user: the directory (or file) is opened first, its real path is read back from
//! `/proc/self/fd`, and it must lie inside one of the roots; every change is then made
//! relative to that open directory (`*at` calls), so nothing swapped in between can
//! redirect it. A link that leads out of the roots is refused; one that leads to
//! another user's file fails on the user's own permissions.
//!
//! The portal treats what comes back as the user's input: a descriptor must be a
//! regular file opened with the access asked for.
//!
//! Owns: the protocol, the operations as the user (`ops.rs`). Must not touch: the
//! store, HTTP, the rules of who may do what (the `Files` service), the switch itself
//! (`privilege`).

mod ops;

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use crate::privilege::{Identity, UserCommand};

pub use ops::{partial_name, MAX_ENTRIES, MAX_NAME};

/// Largest request the program reads.
const MAX_REQUEST: u64 = 1 << 20;
/// Largest answer the portal reads (a listing of [`MAX_ENTRIES`] long names fits).
const MAX_ANSWER: u64 = 16 << 20;

/// A folder the user may work in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Root {
    pub path: PathBuf,
    pub read_only: bool,
}

/// One operation, on absolute paths already confined by name (`homes::confine`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    List {
        path: PathBuf,
    },
    Mkdir {
        path: PathBuf,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
        overwrite: bool,
    },
    Delete {
        path: PathBuf,
        recursive: bool,
    },
    /// Open a regular file for reading: answered with [`Answer::Opened`] and its
    /// descriptor.
    OpenRead {
        path: PathBuf,
    },
    /// Open the partial file of an upload to `path` for writing at `offset` (which must
    /// not exceed what it holds; it is cut there): [`Answer::Opened`] and its
    /// descriptor.
    OpenWrite {
        path: PathBuf,
        offset: u64,
    },
    /// How much of an upload to `path` the partial file holds.
    Status {
        path: PathBuf,
    },
    /// Put the partial file in place as `path`, when it holds `size` bytes.
    Complete {
        path: PathBuf,
        size: Option<u64>,
        overwrite: bool,
        /// The file it replaces keeps its permissions (an edited script stays
        /// executable).
        #[serde(default)]
        keep_mode: bool,
        /// Only if the file it replaces was last modified then (ms): an edit of a
        /// file that changed since it was opened is refused as a conflict.
        #[serde(default)]
        if_modified_ms: Option<i64>,
    },
}

/// What the program sends for [`Request`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub roots: Vec<Root>,
    pub op: Op,
}

/// One entry of a folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    /// `dir`, `file`, `other`, or `broken` (a link that leads nowhere readable).
    pub kind: String,
    /// Whether the entry is a symbolic link (`kind` is what it leads to).
    pub link: bool,
    pub size: u64,
    /// Last modification, ms since the epoch.
    pub modified_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    Listing {
        /// The folder's real path.
        path: PathBuf,
        read_only: bool,
        entries: Vec<Entry>,
        /// More than [`MAX_ENTRIES`] entries: the rest are not listed.
        truncated: bool,
    },
    /// Done, on this real path.
    Done { path: PathBuf },
    /// A file opened; its descriptor travels with the answer.
    Opened {
        path: PathBuf,
        size: u64,
        modified_ms: i64,
    },
    Status {
        /// Bytes the partial file holds (0: none).
        offset: u64,
        /// Whether a file of the target's name exists.
        exists: bool,
    },
}

/// Why an operation was refused, in the user's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub kind: RefusalKind,
    /// The request's field it is about: `path`, `from`, `to`, `offset`, `size`.
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// Outside the roots, not a valid name, not the kind of file asked for.
    Invalid,
    /// The user's permissions do not allow it.
    Forbidden,
    /// In a read-only root (a data set).
    ReadOnly,
    NotFound,
    /// Exists already, or not in a state that allows it (an offset past the end).
    Conflict,
}

/// The program's whole answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Ok(Answer),
    Refused(Refusal),
}

/// Why [`call`] did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The program could not run or answered nonsense (the cause, for the log).
    #[error("{0}")]
    Failed(String),
    /// The program did not answer within its deadline: it was killed.
    #[error("the operation did not finish within {} s and was stopped", .0.as_secs())]
    TimedOut(Duration),
}

/// Run `request` as `identity`: the answer, and the open file when the operation
/// opens one (checked: a regular file, with the access asked for).
///
/// The program is the user's process: the user may stop it (`SIGSTOP`), or it may
/// hang on a file system. Its answer is received asynchronously, holding no thread,
/// and `deadline` covers everything (the answer, its exit and its error output);
/// past it the program is killed and reaped.
pub async fn call(
    identity: &Identity,
    request: &Request,
    deadline: Duration,
) -> Result<(Answer, Option<std::fs::File>), CallError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| CallError::Failed(format!("{what}: {e}"));
    let (ours, theirs) = UnixStream::pair().map_err(|e| failed("socket pair", &e))?;
    ours.set_nonblocking(true)
        .map_err(|e| failed("socket pair", &e))?;
    let ours = tokio::net::UnixStream::from_std(ours).map_err(|e| failed("socket pair", &e))?;
    let exe = std::env::current_exe().map_err(|e| failed("own path", &e))?;
    let body = serde_json::to_vec(request).map_err(|e| failed("request", &e))?;
    let (mut child, mut stdin) = UserCommand::new(identity, exe)
        .args(["files"])
        .current_dir("/")
        .spawn(Stdio::from(OwnedFd::from(theirs)), Stdio::piped())
        .await
        .map_err(|e| failed("starting atrium files", &e))?;
    let exchange = async {
        stdin
            .write_all(&body)
            .await
            .map_err(|e| failed("sending the request", &e))?;
        drop(stdin);
        let received = receive(ours).await;
        let mut text = String::new();
        if received.is_err() {
            if let Some(mut err) = child.stderr.take() {
                use tokio::io::AsyncReadExt;
                let _ = (&mut err).take(4096).read_to_string(&mut text).await;
            }
        }
        let status = child.wait().await;
        Ok::<_, CallError>((received, status, text))
    };
    let waited = tokio::time::timeout(deadline, exchange).await;
    let (received, status, text) = match waited {
        Ok(done) => done?,
        Err(_) => {
            // SIGKILL ends a stopped process too; then it is reaped here.
            let _ = child.start_kill();
            let _ = child.wait().await;
            tracing::warn!(user = %identity.user, seconds = deadline.as_secs(), "atrium files did not answer in time: killed");
            return Err(CallError::TimedOut(deadline));
        }
    };
    let (bytes, fd) = received.map_err(|e| {
        CallError::Failed(format!("atrium files ({status:?}): {e}: {}", text.trim()))
    })?;
    let reply: Reply = serde_json::from_slice(&bytes).map_err(|e| {
        failed(
            &format!(
                "atrium files answered ({status:?}) {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ),
            &e,
        )
    })?;
    let answer = match reply {
        Reply::Ok(answer) => answer,
        Reply::Refused(refusal) => return Err(CallError::Refused(refusal)),
    };
    let file = match (&request.op, &answer, fd) {
        (Op::OpenRead { .. }, Answer::Opened { .. }, Some(fd)) => Some(checked(fd, false)?),
        (Op::OpenWrite { .. }, Answer::Opened { .. }, Some(fd)) => Some(checked(fd, true)?),
        (Op::OpenRead { .. } | Op::OpenWrite { .. }, _, _) => {
            return Err(CallError::Failed(
                "no descriptor came with the answer".into(),
            ))
        }
        (_, _, _) => None,
    };
    Ok((answer, file))
}

/// A descriptor from the program, as a file: a regular file, opened for writing when
/// `write`, else for reading.
fn checked(fd: OwnedFd, write: bool) -> Result<std::fs::File, CallError> {
    use rustix::fs::{fcntl_getfl, fstat, FileType, OFlags};
    let bad = |what: &str| CallError::Failed(format!("the descriptor passed back {what}"));
    let stat = fstat(&fd).map_err(|_| bad("cannot be examined"))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(bad("is not a regular file"));
    }
    let flags = fcntl_getfl(&fd).map_err(|_| bad("has no flags"))?;
    let mode = flags & OFlags::RWMODE;
    let ok = if write {
        mode == OFlags::WRONLY || mode == OFlags::RDWR
    } else {
        mode == OFlags::RDONLY || mode == OFlags::RDWR
    };
    if !ok || (write && flags.contains(OFlags::APPEND)) {
        return Err(bad("has the wrong access mode"));
    }
    Ok(std::fs::File::from(fd))
}

/// Everything the program sends until it closes its end, and the descriptor that
/// came with it: the first part with `recvmsg` (the descriptor travels with it), the
/// rest read as it comes, at most [`MAX_ANSWER`] bytes.
async fn receive(
    mut socket: tokio::net::UnixStream,
) -> std::io::Result<(Vec<u8>, Option<OwnedFd>)> {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    use std::io::IoSliceMut;
    use std::mem::MaybeUninit;
    use tokio::io::AsyncReadExt;
    let mut first = vec![0u8; 64 * 1024];
    let mut fd = None;
    let got = loop {
        socket.readable().await?;
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let result = socket.try_io(tokio::io::Interest::READABLE, || {
            recvmsg(
                &socket,
                &mut [IoSliceMut::new(&mut first)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
            )
            .map_err(std::io::Error::from)
        });
        match result {
            Ok(got) => {
                for message in control.drain() {
                    if let RecvAncillaryMessage::ScmRights(fds) = message {
                        for received in fds {
                            // The first; any other is closed as it drops.
                            if fd.is_none() {
                                fd = Some(received);
                            }
                        }
                    }
                }
                break got.bytes;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    };
    first.truncate(got);
    if got > 0 {
        (&mut socket)
            .take(MAX_ANSWER)
            .read_to_end(&mut first)
            .await?;
    }
    if first.is_empty() {
        return Err(std::io::Error::other("no answer"));
    }
    Ok((first, fd))
}

/// `atrium files`: read a [`Request`] from standard input, perform it as whoever runs
/// this (the user, through `privilege`), answer on standard output with the
/// descriptor of a file it opened. Exit status 0 whenever an answer was sent.
pub fn main() -> anyhow::Result<()> {
    if crate::privilege::is_root() {
        anyhow::bail!("atrium files runs as a user, never as root");
    }
    let mut body = Vec::new();
    std::io::stdin().take(MAX_REQUEST).read_to_end(&mut body)?;
    let request: Request = serde_json::from_slice(&body)?;
    let (reply, fd) = match ops::perform(&request) {
        Ok((answer, fd)) => (Reply::Ok(answer), fd),
        Err(refusal) => (Reply::Refused(refusal), None),
    };
    send(&serde_json::to_vec(&reply)?, fd.as_ref())?;
    Ok(())
}

/// Send `bytes` on standard output (a socket), with `fd` attached to the first part.
fn send(bytes: &[u8], fd: Option<&OwnedFd>) -> std::io::Result<()> {
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    use std::io::{IoSlice, Write};
    use std::mem::MaybeUninit;
    let out = std::io::stdout();
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let borrowed = fd.map(|f| [f.as_fd()]);
    if let Some(fds) = &borrowed {
        if !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(std::io::Error::other("no room for the descriptor"));
        }
    }
    let sent = sendmsg(
        out.as_fd(),
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    let mut lock = out.lock();
    lock.write_all(&bytes[sent..])?;
    lock.flush()
}
