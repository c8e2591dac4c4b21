//! The JSON API under `/api/v1`, one file per resource.

mod login;
mod me;
pub mod tokens;

use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/login", web::post().to(login::post))
        .route("/me", web::get().to(me::get))
        .route("/tokens", web::get().to(tokens::list))
        .route("/tokens", web::post().to(tokens::create))
        .route("/tokens/{id}", web::delete().to(tokens::revoke))
        .default_service(web::to(|| async {
            Err::<(), _>(super::ApiError::NotFound)
        }));
}

/// A time for JSON: RFC 3339 in UTC.
pub fn rfc3339(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}
