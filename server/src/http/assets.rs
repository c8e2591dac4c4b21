//! Static assets (CSS, scripts, icons) embedded from `frontend/` at build time.

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use rust_embed::RustEmbed;

use super::ApiError;

#[derive(RustEmbed)]
#[folder = "../frontend/"]
struct Assets;

pub async fn serve(path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let file = Assets::get(path.as_str()).ok_or(ApiError::NotFound)?;
    let mime = mime_guess::from_path(path.as_str()).first_or_octet_stream();
    Ok(HttpResponse::Ok()
        .content_type(mime.as_ref())
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header((
            header::ETAG,
            format!("\"{}\"", hex::encode(&file.metadata.sha256_hash()[..8])),
        ))
        .body(file.data.into_owned()))
}
