//! `/api/v1/files`: the Files app's API: list a folder (or the caller's roots), create
//! a folder, rename, delete, download (streamed, with ranges), and uploads in pieces
//! (`PUT …/upload?path=&offset=` appends at an offset, `GET`/`HEAD …/upload?path=`
//! says how much the portal holds, `POST …/upload/complete` puts the file in place).
//!
//! The rules and every file operation are the Files service's (`services::files`),
//! done as the user; these handlers parse, call it and frame the bytes.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use crate::services::files::Download;
pub use crate::services::files::{Crumb, EntryInfo, Listing, RootInfo, UploadStatus};

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct PathQuery {
    /// An absolute path, or one relative to the caller's home.
    pub path: Option<String>,
    /// `DELETE`: remove a folder with everything in it.
    #[serde(default)]
    pub recursive: bool,
}

impl PathQuery {
    fn path(&self) -> Result<&str, ApiError> {
        self.path
            .as_deref()
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| ApiError::InvalidField {
                field: "path",
                message: "path is required".into(),
            })
    }
}

/// The caller's roots (no `path`), or a folder's entries.
#[derive(Debug, Serialize, ToSchema)]
pub struct FilesAnswer {
    /// Without `path`: the folders the caller may browse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roots: Option<Vec<RootInfo>>,
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub listing: Option<Listing>,
}

/// What a change did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Changed {
    /// The real path of what was created, renamed, deleted or uploaded.
    pub path: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewFolder {
    pub path: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rename {
    pub from: String,
    pub to: String,
    /// Replace `to` when it exists.
    #[serde(default)]
    pub overwrite: bool,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteUpload {
    pub path: String,
    /// The file's size: refused unless the portal holds exactly this much.
    pub size: Option<u64>,
    /// Replace a file of that name.
    #[serde(default)]
    pub overwrite: bool,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct PieceQuery {
    pub path: String,
    /// Where this piece starts: at most what the portal holds (`GET …/upload`); a
    /// smaller offset cuts the upload there.
    pub offset: u64,
}

/// The piece's new end.
#[derive(Debug, Serialize, ToSchema)]
pub struct PieceWritten {
    pub path: String,
    /// Bytes the portal holds now: the next piece's offset.
    pub offset: u64,
}

/// The caller's roots, or a folder's entries (folders first).
#[utoipa::path(get, path = "/api/v1/files", params(PathQuery),
    responses((status = 200, body = FilesAnswer), (status = 400, description = "path outside the caller's roots, or not a folder"), (status = 403)))]
pub async fn list(
    caller: Principal,
    state: web::Data<AppState>,
    query: crate::http::query::Query<PathQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let answer = match query.path.as_deref().filter(|p| !p.trim().is_empty()) {
        None => FilesAnswer {
            roots: Some(state.files.roots(&caller).await?),
            listing: None,
        },
        Some(path) => FilesAnswer {
            roots: None,
            listing: Some(state.files.list(&caller, path).await?),
        },
    };
    Ok(HttpResponse::Ok().json(answer))
}

/// Create a folder.
#[utoipa::path(post, path = "/api/v1/files/mkdir", request_body = NewFolder,
    responses((status = 201, body = Changed), (status = 400), (status = 403, description = "a data set (read-only), or the caller's permissions"), (status = 409)))]
pub async fn mkdir(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Json<NewFolder>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let path = state
        .files
        .mkdir(&caller, &state.client_addr(&req), &body.path)
        .await?;
    Ok(HttpResponse::Created().json(Changed { path }))
}

/// Rename or move a file or folder.
#[utoipa::path(post, path = "/api/v1/files/rename", request_body = Rename,
    responses((status = 200, body = Changed), (status = 400), (status = 403), (status = 409, description = "to exists")))]
pub async fn rename(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Json<Rename>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let path = state
        .files
        .rename(
            &caller,
            &state.client_addr(&req),
            &body.from,
            &body.to,
            body.overwrite,
        )
        .await?;
    Ok(HttpResponse::Ok().json(Changed { path }))
}

/// Delete a file, a link, or a folder (`recursive=true` for one that is not empty).
#[utoipa::path(delete, path = "/api/v1/files", params(PathQuery),
    responses((status = 200, body = Changed), (status = 400), (status = 403), (status = 409, description = "a folder that is not empty")))]
pub async fn delete(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    query: crate::http::query::Query<PathQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let path = state
        .files
        .delete(
            &caller,
            &state.client_addr(&req),
            query.path()?,
            query.recursive,
        )
        .await?;
    Ok(HttpResponse::Ok().json(Changed { path }))
}

/// Download a file: streamed, `Content-Disposition: attachment`, byte ranges.
#[utoipa::path(get, path = "/api/v1/files/download", params(PathQuery),
    responses((status = 200, description = "the file"), (status = 206, description = "a range of it"), (status = 400), (status = 403), (status = 416)))]
pub async fn download(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    query: crate::http::query::Query<PathQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let file = state.files.download(&caller, query.path()?).await?;
    Ok(download_response(&req, file))
}

/// How much of an upload the portal holds (also `HEAD`: the `Upload-Offset` header).
#[utoipa::path(get, path = "/api/v1/files/upload", params(PathQuery),
    responses((status = 200, body = UploadStatus), (status = 400), (status = 403)))]
pub async fn upload_status(
    caller: Principal,
    state: web::Data<AppState>,
    query: crate::http::query::Query<PathQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let status = state.files.upload_status(&caller, query.path()?).await?;
    Ok(HttpResponse::Ok()
        .insert_header(("Upload-Offset", status.offset.to_string()))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(status))
}

/// Write a piece of an upload at `offset`, streamed to disk as it arrives.
#[utoipa::path(put, path = "/api/v1/files/upload", params(PieceQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 200, body = PieceWritten), (status = 400, description = "a piece larger than storage.max_upload_chunk_mb, or a file larger than storage.max_upload_mb"), (status = 403), (status = 409, description = "offset past what the portal holds")))]
pub async fn upload_piece(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    query: crate::http::query::Query<PieceQuery>,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let length = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let piece = state
        .files
        .upload_piece(&caller, &query.path, query.offset, length)
        .await?;
    let offset = piece.write_from(body).await?;
    Ok(HttpResponse::Ok()
        .insert_header(("Upload-Offset", offset.to_string()))
        .json(PieceWritten {
            path: query.path.clone(),
            offset,
        }))
}

/// Put a finished upload in place.
#[utoipa::path(post, path = "/api/v1/files/upload/complete", request_body = CompleteUpload,
    responses((status = 200, body = Changed), (status = 400), (status = 403), (status = 409, description = "the size differs, or the file exists and overwrite is false")))]
pub async fn complete_upload(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Json<CompleteUpload>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let path = state
        .files
        .complete_upload(
            &caller,
            &state.client_addr(&req),
            &body.path,
            body.size,
            body.overwrite,
        )
        .await?;
    Ok(HttpResponse::Ok().json(Changed { path }))
}

/// A range of `size` bytes asked for by `Range: bytes=…`: `Ok(None)` for the whole
/// file (no header, or one this does not serve: several ranges, other units),
/// `Err(())` when it cannot be satisfied.
fn range(req: &HttpRequest, size: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(value) = req
        .headers()
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(None);
    };
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((first, last)) = spec.split_once('-') else {
        return Err(());
    };
    let (first, last) = (first.trim(), last.trim());
    let (start, end) = if first.is_empty() {
        let suffix: u64 = last.parse().map_err(|_| ())?;
        if suffix == 0 {
            return Err(());
        }
        (size.saturating_sub(suffix), size.saturating_sub(1))
    } else {
        let start: u64 = first.parse().map_err(|_| ())?;
        let end = if last.is_empty() {
            size.saturating_sub(1)
        } else {
            last.parse::<u64>()
                .map_err(|_| ())?
                .min(size.saturating_sub(1))
        };
        (start, end)
    };
    if size == 0 || start > end || start >= size {
        return Err(());
    }
    Ok(Some((start, end)))
}

/// `Content-Disposition: attachment` with `name`, plain and UTF-8.
fn attachment(name: &str) -> String {
    let plain: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ' ') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "attachment; filename=\"{plain}\"; filename*=UTF-8''{}",
        crate::http::error::urlencode(name).replace('/', "%2F")
    )
}

/// The response for a download: the whole file or the range asked for.
pub fn download_response(req: &HttpRequest, file: Download) -> HttpResponse {
    let size = file.size;
    let mime = mime_guess::from_path(&file.name).first_or_octet_stream();
    let disposition = attachment(&file.name);
    let (status, start, end) = match range(req, size) {
        Ok(None) => (StatusCode::OK, 0, size.saturating_sub(1)),
        Ok(Some((start, end))) => (StatusCode::PARTIAL_CONTENT, start, end),
        Err(()) => {
            return HttpResponse::RangeNotSatisfiable()
                .insert_header((header::CONTENT_RANGE, format!("bytes */{size}")))
                .json(serde_json::json!({
                    "error": "range_not_satisfiable",
                    "message": format!("the range is outside the file ({size} bytes)"),
                    "field": "range",
                }));
        }
    };
    let mut response = HttpResponse::build(status);
    response
        .content_type(mime.as_ref())
        .insert_header((header::CONTENT_DISPOSITION, disposition))
        .insert_header((header::ACCEPT_RANGES, "bytes"))
        .insert_header((header::CACHE_CONTROL, "no-store"));
    if status == StatusCode::PARTIAL_CONTENT {
        response.insert_header((header::CONTENT_RANGE, format!("bytes {start}-{end}/{size}")));
    }
    if size == 0 {
        return response.body(Vec::<u8>::new());
    }
    let length = end - start + 1;
    response
        .no_chunking(length)
        .streaming(Box::pin(file.stream(start, end)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn ranges_are_read_as_rfc_9110_says() {
        let with = |v: &str| {
            TestRequest::default()
                .insert_header((header::RANGE, v))
                .to_http_request()
        };
        assert_eq!(
            range(&TestRequest::default().to_http_request(), 10),
            Ok(None)
        );
        assert_eq!(range(&with("bytes=0-3"), 10), Ok(Some((0, 3))));
        assert_eq!(range(&with("bytes=5-"), 10), Ok(Some((5, 9))));
        assert_eq!(range(&with("bytes=-4"), 10), Ok(Some((6, 9))));
        assert_eq!(range(&with("bytes=8-100"), 10), Ok(Some((8, 9))));
        assert_eq!(range(&with("bytes=0-1,4-5"), 10), Ok(None));
        assert_eq!(range(&with("bytes=10-"), 10), Err(()));
        assert_eq!(range(&with("bytes=x-"), 10), Err(()));
    }

    #[test]
    fn the_file_name_is_quoted_safely() {
        assert_eq!(
            attachment("a \"b\".txt"),
            "attachment; filename=\"a _b_.txt\"; filename*=UTF-8''a%20%22b%22.txt"
        );
    }
}
