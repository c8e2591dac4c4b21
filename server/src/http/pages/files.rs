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
use crate::http::pages::when::filters;
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
    /// Names starting with a dot are listed (`?hidden=1`); how many there are.
    show_hidden: bool,
    hidden: usize,
    /// The app that opens a terminal in a folder ("Open a terminal here"), if any.
    terminal_app: Option<String>,
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
        // As every page writes a time (the browser shows it in its own zone).
        crate::http::pages::when::readable(entry.modified_ms)
    }

    fn iso(&self, entry: &EntryInfo) -> String {
        crate::util::rfc3339(entry.modified_ms)
    }

    fn open_url(&self, entry: &EntryInfo) -> String {
        let encoded = crate::http::error::urlencode(&entry.path);
        if entry.kind == "dir" {
            format!("/files?path={encoded}{}", self.hidden_param())
        } else {
            format!("/files/view?path={encoded}")
        }
    }

    fn download_url(&self, entry: &EntryInfo) -> String {
        format!(
            "/files/download?path={}",
            crate::http::error::urlencode(&entry.path)
        )
    }

    /// The start form for a terminal in the folder shown.
    fn terminal_url(&self, app: &str) -> String {
        let path = self.listing.as_ref().map_or("", |l| l.path.as_str());
        format!(
            "/sessions/new?kind={}&folder={}",
            crate::http::error::urlencode(app),
            crate::http::error::urlencode(path)
        )
    }

    fn dir_url(&self, path: &str) -> String {
        format!(
            "/files?path={}{}",
            crate::http::error::urlencode(path),
            self.hidden_param()
        )
    }

    /// The same folder with hidden files shown, or not.
    fn toggle_hidden_url(&self) -> String {
        let path = self.listing.as_ref().map_or("", |l| l.path.as_str());
        let encoded = crate::http::error::urlencode(path);
        if self.show_hidden {
            format!("/files?path={encoded}")
        } else {
            format!("/files?path={encoded}&hidden=1")
        }
    }

    fn hidden_param(&self) -> &'static str {
        if self.show_hidden {
            "&hidden=1"
        } else {
            ""
        }
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
    let show_hidden = matches!(query_value(&pairs, "hidden").as_str(), "1" | "true");
    let mut page = FilesPage {
        nav: Nav::of(&me).at(Section::Files),
        roots,
        listing: None,
        error: None,
        chunk_bytes: state.files.max_chunk_bytes().min(PAGE_CHUNK),
        max_file_bytes: state.files.max_file_bytes(),
        show_hidden,
        hidden: 0,
        terminal_app: state.sessions.terminal_apps().into_iter().next(),
    };
    if path.is_empty() {
        return render(&page, StatusCode::OK);
    }
    match state.files.list(&me, &path).await {
        Ok(mut listing) => {
            // Dot files (settings, caches) are left out unless asked for.
            page.hidden = listing
                .entries
                .iter()
                .filter(|e| e.name.starts_with('.'))
                .count();
            if !show_hidden {
                listing.entries.retain(|e| !e.name.starts_with('.'));
            }
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
    let inline = query_value(&pairs, "inline") == "1";
    match state.files.download(&me, &path).await {
        Ok(file) if inline && is_image(&file.name) => {
            let mut response = download_response(&req, file);
            // Shown in the page, never run: a raster image only, sandboxed.
            let headers = response.headers_mut();
            headers.insert(
                actix_web::http::header::CONTENT_DISPOSITION,
                actix_web::http::header::HeaderValue::from_static("inline"),
            );
            headers.insert(
                actix_web::http::header::CONTENT_SECURITY_POLICY,
                actix_web::http::header::HeaderValue::from_static("sandbox; default-src 'none'"),
            );
            headers.insert(
                actix_web::http::header::X_CONTENT_TYPE_OPTIONS,
                actix_web::http::header::HeaderValue::from_static("nosniff"),
            );
            Ok(response)
        }
        Ok(file) => Ok(download_response(&req, file)),
        Err(e) => refused(e),
    }
}

/// A raster image the page may show (never SVG: it can carry script).
fn is_image(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".png", ".jpg", ".jpeg", ".gif", ".webp"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

/// Whether a file looks like a batch script: `#!` first, or a script's name.
fn is_script(name: &str, text: &str) -> bool {
    text.starts_with("#!")
        || [".sh", ".sbatch", ".slurm", ".bash"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

#[derive(Template)]
#[template(path = "files/view.html")]
struct ViewPage {
    nav: Nav,
    file: crate::services::files::TextFile,
    /// The folder it is in, for the link back and a job's working directory.
    folder: String,
    /// Shown as an image (`/files/download?…&inline=1`).
    image: bool,
    /// The text may be edited and saved (a text file, not in a data set).
    editable: bool,
    script: bool,
    /// What the editor holds: the file's text, or the user's after a refusal.
    draft: Option<String>,
    notice: Option<String>,
    saved: bool,
}

impl ViewPage {
    fn q(&self, path: &str) -> String {
        crate::http::error::urlencode(path)
    }

    fn size(&self) -> String {
        human_size(self.file.size)
    }

    fn modified(&self) -> String {
        crate::util::rfc3339(self.file.modified_ms)
    }
}

/// `GET /files/view?path=…`: a file in the page: its text (editable where the user
/// may write), or an image; download, and "submit as a job" for a script.
pub async fn view(
    state: web::Data<AppState>,
    user: PageUser,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let pairs = query_pairs(&req)?;
    let path = query_value(&pairs, "path");
    let saved = query_value(&pairs, "saved") == "1";
    view_page(&state, &me, &path, None, None, saved, StatusCode::OK).await
}

async fn view_page(
    state: &AppState,
    me: &crate::auth::Principal,
    path: &str,
    draft: Option<String>,
    notice: Option<String>,
    saved: bool,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let file = match state.files.read_text(me, path).await {
        Ok(f) => f,
        Err(e) => return refused(e),
    };
    let folder = std::path::Path::new(&file.path)
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let script = file
        .text
        .as_deref()
        .is_some_and(|t| is_script(&file.name, t));
    render(
        &ViewPage {
            nav: Nav::of(me).at(Section::Files),
            image: is_image(&file.name),
            editable: file.text.is_some() && !file.read_only && me.require(Scope::Jobs).is_ok(),
            script,
            draft,
            notice,
            saved,
            folder,
            file,
        },
        status,
    )
}

/// The editor's form.
#[derive(Debug, serde::Deserialize)]
pub struct SaveForm {
    #[serde(default)]
    csrf: String,
    path: String,
    text: String,
    /// When the file was last modified as the page showed it (ms).
    #[serde(default)]
    opened_ms: Option<i64>,
}

/// `POST /files/save`: the editor's text in place of the file, as the user, unless
/// it changed since it was opened; back to the file, or the editor again with the
/// text and why.
pub async fn save(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    form: web::Form<SaveForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    let form = form.into_inner();
    if !me.csrf_ok(Some(&form.csrf)) {
        return super::csrf_refused();
    }
    me.require(Scope::Jobs)?;
    // Browsers send a textarea's lines ending in CRLF.
    let text = form.text.replace("\r\n", "\n");
    match state
        .files
        .save_text(&me, &state.client_addr(&req), &form.path, &text, form.opened_ms)
        .await
    {
        Ok(done) => Ok(HttpResponse::SeeOther()
            .insert_header((
                actix_web::http::header::LOCATION,
                format!("/files/view?path={}&saved=1", crate::http::error::urlencode(&done)),
            ))
            .finish()),
        Err(ServiceError::Conflict(_)) => {
            view_page(
                &state,
                &me,
                &form.path,
                Some(text),
                Some("The file changed since you opened it, so your text was not saved. It is below: copy what you need, then reload the file.".into()),
                false,
                StatusCode::CONFLICT,
            )
            .await
        }
        Err(e) => {
            let error = ApiError::from(e);
            let code = actix_web::ResponseError::status_code(&error);
            if code.is_server_error() {
                return Err(error);
            }
            view_page(&state, &me, &form.path, Some(text), Some(error.to_string()), false, code).await
        }
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
            show_hidden: false,
            hidden: 0,
            terminal_app: Some("terminal".into()),
        };
        let html = page.render().expect("render");
        assert!(html.contains("/files?path=/home/alice/runs"), "{html}");
        assert!(
            html.contains("/files/view?path=/home/alice/%3Cb%3E.txt"),
            "{html}"
        );
        assert!(!html.contains("<b>.txt"));
        assert!(html.contains("2.0 KiB"));
        assert!(
            html.contains("/sessions/new?kind=terminal&#38;folder=/home/alice\""),
            "{html}"
        );
    }
}
