//! `GET /files?path=…`: the Files app's page: the caller's roots (no path), or a
//! folder with its breadcrumbs, its entries (folders first) and buttons to upload,
//! create a folder, rename and delete, which `frontend/js/files.js` does through the
//! API (`/api/v1/files`). `GET /files/download?path=…`: a file, streamed as an
//! attachment. Job pages link to both.
//!
//! Owns: laying a folder out. Must not touch: the rules or the files themselves (the
//! Files service, which works as the user).

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{query_value, render, MessagePage, Nav, Section};
use crate::auth::Scope;
use crate::http::api::benchmarks::query_pairs;
use crate::http::api::files::download_response;
use crate::http::authn::PageUser;
use crate::http::{ApiError, AppState};
use crate::services::files::{EntryInfo, Listing, RootInfo};
use crate::services::ServiceError;

#[derive(Template)]
#[template(path = "files/browse.html")]
struct FilesPage {
    nav: Nav,
    roots: Vec<RootInfo>,
    listing: Option<Listing>,
    error: Option<String>,
    /// The size of one upload request, in bytes.
    chunk_bytes: u64,
    max_file_bytes: u64,
}

impl FilesPage {
    fn size(&self, entry: &EntryInfo) -> String {
        if entry.kind == "file" {
            human_size(entry.size)
        } else {
            String::new()
        }
    }

    fn modified(&self, entry: &EntryInfo) -> String {
        if entry.modified_ms <= 0 {
            return String::new();
        }
        let text = crate::util::rfc3339(entry.modified_ms);
        text.trim_end_matches('Z').replacen('T', " ", 1) + " UTC"
    }

    fn iso(&self, entry: &EntryInfo) -> String {
        crate::util::rfc3339(entry.modified_ms)
    }

    fn open_url(&self, entry: &EntryInfo) -> String {
        let encoded = crate::http::error::urlencode(&entry.path);
        if entry.kind == "dir" {
            format!("/files?path={encoded}")
        } else {
            format!("/files/download?path={encoded}")
        }
    }

    fn dir_url(&self, path: &str) -> String {
        format!("/files?path={}", crate::http::error::urlencode(path))
    }

    fn max_file(&self) -> String {
        human_size(self.max_file_bytes)
    }
}

/// Bytes in the largest binary unit that keeps a whole part (`1.5 GiB`).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return if bytes == 1 {
            "1 byte".into()
        } else {
            format!("{bytes} bytes")
        };
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value < 10.0 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}

/// What the page's script sends per request: the server's bound, at most 64 MiB.
const PAGE_CHUNK: u64 = 64 << 20;

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let pairs = query_pairs(&req)?;
    let path = query_value(&pairs, "path");
    let roots = match state.files.roots(&me).await {
        Ok(roots) => roots,
        Err(e) => return refused(e),
    };
    let mut page = FilesPage {
        nav: Nav::of(&me).at(Section::Files),
        roots,
        listing: None,
        error: None,
        chunk_bytes: state.files.max_chunk_bytes().min(PAGE_CHUNK),
        max_file_bytes: state.files.max_file_bytes(),
    };
    if path.is_empty() {
        return render(&page, StatusCode::OK);
    }
    match state.files.list(&me, &path).await {
        Ok(listing) => {
            page.listing = Some(listing);
            render(&page, StatusCode::OK)
        }
        Err(e) => {
            let status = ApiError::from(e);
            let code = actix_web::ResponseError::status_code(&status);
            if code.is_server_error() {
                return Err(status);
            }
            page.error = Some(status.to_string());
            render(&page, code)
        }
    }
}

/// `GET /files/download?path=…`.
pub async fn download(
    state: web::Data<AppState>,
    user: PageUser,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let pairs = query_pairs(&req)?;
    let path = query_value(&pairs, "path");
    if path.is_empty() {
        return render(
            &MessagePage {
                title: "No file named",
                message: "Say which file to download: /files/download?path=/path/to/file.",
            },
            StatusCode::BAD_REQUEST,
        );
    }
    match state.files.download(&me, &path).await {
        Ok(file) => Ok(download_response(&req, file)),
        Err(e) => refused(e),
    }
}

/// A refusal as a page in plain words (a server error stays one).
fn refused(e: ServiceError) -> Result<HttpResponse, ApiError> {
    let error = ApiError::from(e);
    let code = actix_web::ResponseError::status_code(&error);
    if code.is_server_error() {
        return Err(error);
    }
    let message = error.to_string();
    render(
        &MessagePage {
            title: "Not possible",
            message: &message,
        },
        code,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_size(0), "0 bytes");
        assert_eq!(human_size(1), "1 byte");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(200 << 20), "200 MiB");
    }

    #[test]
    fn the_page_renders_a_folder_with_its_links_escaped() {
        let page = FilesPage {
            nav: super::super::tests::nav(),
            roots: vec![RootInfo {
                label: "Home".into(),
                path: "/home/alice".into(),
                read_only: false,
            }],
            listing: Some(Listing {
                path: "/home/alice".into(),
                parent: None,
                read_only: false,
                breadcrumbs: vec![crate::services::files::Crumb {
                    name: "/home/alice".into(),
                    path: "/home/alice".into(),
                }],
                entries: vec![
                    EntryInfo {
                        name: "runs".into(),
                        path: "/home/alice/runs".into(),
                        kind: "dir".into(),
                        link: false,
                        size: 0,
                        modified_ms: 1_700_000_000_000,
                    },
                    EntryInfo {
                        name: "<b>.txt".into(),
                        path: "/home/alice/<b>.txt".into(),
                        kind: "file".into(),
                        link: false,
                        size: 2048,
                        modified_ms: 1_700_000_000_000,
                    },
                ],
                truncated: false,
            }),
            error: None,
            chunk_bytes: 1 << 20,
            max_file_bytes: 1 << 30,
        };
        let html = page.render().expect("render");
        assert!(html.contains("/files?path=/home/alice/runs"), "{html}");
        assert!(
            html.contains("/files/download?path=/home/alice/%3Cb%3E.txt"),
            "{html}"
        );
        assert!(!html.contains("<b>.txt"));
        assert!(html.contains("2.0 KiB"));
    }
}
