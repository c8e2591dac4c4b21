//! HTTP: routes, middleware, extractors, the JSON API and the pages.
//!
//! Owns: the mapping of URLs to handlers and of errors to responses. Handlers are
//! short: parse, call one service, map the result. Must not touch: SQL (the store
//! does it) or policy (auth and the services decide).

pub mod api;
mod assets;
pub mod authn;
pub mod error;
mod health;
pub mod observe;
pub mod pages;
pub mod proxy;
pub mod query;
pub mod signin;

use std::net::IpAddr;

use actix_web::{middleware, web, HttpRequest, HttpResponse};

use crate::auth::login::Logins;
use crate::auth::rate_limit::LoginLimiter;
use crate::metrics::Metrics;
use crate::portal::Portal;

pub use error::ApiError;

/// What every handler may use.
#[derive(Debug)]
pub struct AppState {
    /// The services, as `state.jobs`, `state.sessions` … through `Deref`.
    pub portal: Portal,
    pub logins: Logins,
    pub limiter: LoginLimiter,
    pub metrics: Metrics,
    pub secure_cookies: bool,
    pub trusted_proxies: Vec<IpAddr>,
}

impl std::ops::Deref for AppState {
    type Target = Portal;

    fn deref(&self) -> &Portal {
        &self.portal
    }
}

impl AppState {
    pub fn client_addr(&self, req: &HttpRequest) -> String {
        authn::client_addr(req, &self.trusted_proxies)
    }

    /// Write an audit entry for an action taken through this request.
    pub async fn record_audit(
        &self,
        req: &HttpRequest,
        actor: &str,
        action: &str,
        target: &str,
        detail: serde_json::Value,
    ) -> Result<(), ApiError> {
        self.audit
            .record(actor, &self.client_addr(req), action, target, detail)
            .await?;
        Ok(())
    }
}

/// Register every route, with the body limits and error handlers.
pub fn configure(cfg: &mut web::ServiceConfig, body_limit: usize) {
    cfg.app_data(
        web::JsonConfig::default()
            .limit(body_limit)
            .error_handler(move |err, _| error::json_error(err, body_limit).into()),
    )
    .app_data(
        web::FormConfig::default()
            .limit(body_limit)
            .error_handler(move |err, _| error::form_error(err, body_limit).into()),
    )
    .app_data(web::PayloadConfig::default().limit(body_limit))
    .route("/healthz", web::get().to(health::healthz))
    .route("/readyz", web::get().to(health::readyz))
    .route("/metrics", web::get().to(health::metrics))
    .route("/static/{file:.*}", web::get().to(assets::serve))
    .service(web::scope("/api/v1").configure(api::configure))
    .service(web::scope("/user").default_service(web::to(proxy::handle)))
    .configure(pages::configure)
    .default_service(web::to(not_found));
}

/// Middleware every request passes, outermost last.
pub fn app(
    state: web::Data<AppState>,
) -> actix_web::App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let body_limit = state.config.http.body_limit_bytes;
    actix_web::App::new()
        .app_data(state)
        .configure(|cfg| configure(cfg, body_limit))
        .wrap(middleware::from_fn(authn::renew_session_cookie))
        .wrap(
            middleware::DefaultHeaders::new()
                .add(("x-content-type-options", "nosniff"))
                .add(("x-frame-options", "DENY"))
                .add(("referrer-policy", "same-origin")),
        )
        .wrap(middleware::from_fn(observe::observe))
}

async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    if req.path().starts_with("/api/") || req.method() != actix_web::http::Method::GET {
        return Err(ApiError::NotFound);
    }
    pages::not_found_page()
}
