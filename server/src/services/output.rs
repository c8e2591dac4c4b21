//! A job's output files, read for the API (whole, from an offset, or followed) and
//! the pages (the last part).
//!
//! The portal reads the file as root, so it opens it without following a final
//! symbolic link and serves it only when it belongs to the job's user: a user cannot
//! swap their output for a link or a hard link to someone else's file.
//!
//! Owns: which file a job's stream is, whose it must be, and reading it in bounded
//! pieces. Must not touch: HTTP (event-stream framing is the handler's).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use scheduler::JobId;

use super::jobs::{JobInfo, Jobs};
use super::ServiceError;
use crate::auth::Principal;

/// Most bytes returned by one read.
pub const MAX_READ: u64 = 1 << 20;

/// One output file of a job, and the uid it must belong to.
#[derive(Debug, Clone)]
pub struct Output {
    path: PathBuf,
    owner: u32,
}

/// The last part of a job's standard output for a page, and the offset to follow it
/// from.
pub struct Tail {
    pub text: String,
    /// Where the file ended: `?follow=true&offset=` continues from here.
    pub next_offset: u64,
    /// Earlier output was left out.
    pub truncated: bool,
}

impl Jobs {
    /// The output file `stream` (`stdout`, the default, or `stderr`) of `job`, if
    /// `caller` may see the job; with the job as it stands.
    pub async fn output(
        &self,
        caller: &Principal,
        job: JobId,
        stream: Option<&str>,
    ) -> Result<(JobInfo, Output), ServiceError> {
        let info = self.show(caller, job).await?;
        let path = match stream {
            None | Some("stdout") => info.stdout.clone(),
            Some("stderr") => info.stderr.clone().or(info.stdout.clone()),
            Some(other) => {
                return Err(ServiceError::invalid(
                    "stream",
                    format!("stream: \"{other}\" is neither stdout nor stderr"),
                ))
            }
        };
        let Some(path) = path.map(PathBuf::from) else {
            return Err(ServiceError::Conflict(
                "the job has not started: it has no output yet".into(),
            ));
        };
        let owner = self.file_owner(&info.user).await?;
        Ok((info, Output { path, owner }))
    }

    /// The last `max_bytes` (at most [`MAX_READ`]) of `info`'s standard output,
    /// starting at a whole line; `None` while the job has no output file yet.
    pub async fn tail(&self, info: &JobInfo, max_bytes: u64) -> Result<Option<Tail>, ServiceError> {
        let Some(path) = info.stdout.as_deref().map(PathBuf::from) else {
            return Ok(None);
        };
        let output = Output {
            path,
            owner: self.file_owner(&info.user).await?,
        };
        let max_bytes = max_bytes.min(MAX_READ);
        let (text, next) = output.read(None, max_bytes)?;
        // Read from `len - max_bytes`, and `next` is where the file ended.
        let truncated = next > max_bytes;
        let text = match (truncated, text.find('\n')) {
            (true, Some(i)) => text[i + 1..].to_string(),
            _ => text,
        };
        Ok(Some(Tail {
            text,
            next_offset: next,
            truncated,
        }))
    }

    /// The uid a job's files must belong to.
    async fn file_owner(&self, user: &str) -> Result<u32, ServiceError> {
        self.identities()
            .file_owner(user)
            .await?
            .ok_or(ServiceError::NotFound)
    }
}

impl Output {
    /// Read from `offset` (default: the last `last` bytes) at most [`MAX_READ`]
    /// bytes; with the offset where the read ended. A file not there yet reads empty.
    pub fn read(&self, offset: Option<u64>, last: u64) -> Result<(String, u64), ServiceError> {
        let path: &Path = &self.path;
        let refused = |e: std::io::Error| {
            tracing::warn!(path = %path.display(), error = %e, "refusing to serve job output");
            ServiceError::Forbidden(
                "the output file is not a regular file of the job's user".into(),
            )
        };
        let Some(mut file) = crate::launch::open_owned(path, self.owner).map_err(refused)? else {
            return Ok((String::new(), offset.unwrap_or(0)));
        };
        let len = file.metadata().map_err(ServiceError::internal)?.len();
        let start = offset.unwrap_or_else(|| len.saturating_sub(last)).min(len);
        file.seek(SeekFrom::Start(start))
            .map_err(ServiceError::internal)?;
        let mut buf = Vec::new();
        file.take(MAX_READ)
            .read_to_end(&mut buf)
            .map_err(ServiceError::internal)?;
        let next = start + buf.len() as u64;
        Ok((String::from_utf8_lossy(&buf).into_owned(), next))
    }

    /// What was written since `offset` (at most [`MAX_READ`] bytes), moving `offset`
    /// past it; nothing when the file cannot be read as the user's.
    pub fn read_new(&self, offset: &mut u64) -> Vec<u8> {
        let Ok(Some(mut file)) = crate::launch::open_owned(&self.path, self.owner) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if file.seek(SeekFrom::Start(*offset)).is_ok()
            && file.take(MAX_READ).read_to_end(&mut buf).is_ok()
        {
            *offset += buf.len() as u64;
        }
        buf
    }
}
