//! Request observation: a request id on every request, its log span and metrics.
//!
//! The id comes from an incoming `x-request-id` when that is a short token, otherwise
//! it is generated; it is returned in the response's `x-request-id` header and named
//! on every log line written while the request is handled.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};
use tracing::Instrument;

use super::AppState;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The id of the request being handled.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

fn incoming_id(req: &ServiceRequest) -> Option<String> {
    let value = req.headers().get(&REQUEST_ID)?.to_str().ok()?;
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then(|| value.to_string())
}

pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let id = incoming_id(&req).unwrap_or_else(|| crate::util::random_text(12));
    let method = req.method().clone();
    let span = tracing::info_span!("request", id = %id, method = %method, path = %req.path());
    req.extensions_mut().insert(RequestId(id.clone()));
    let metrics = req
        .app_data::<web::Data<AppState>>()
        .map(|state| state.metrics.clone());

    let result = next.call(req).instrument(span.clone()).await;
    let elapsed = started.elapsed().as_secs_f64();
    let header = HeaderValue::from_str(&id).ok();
    match result {
        Ok(mut res) => {
            let status = res.status();
            let route = res.request().match_pattern();
            if let Some(metrics) = &metrics {
                metrics.observe_request(
                    route.as_deref().unwrap_or("unmatched"),
                    method.as_str(),
                    status.as_str(),
                    elapsed,
                );
            }
            span.in_scope(|| {
                if status.is_server_error() {
                    tracing::warn!(
                        status = status.as_u16(),
                        elapsed_ms = elapsed * 1e3,
                        "request failed"
                    );
                } else {
                    tracing::debug!(
                        status = status.as_u16(),
                        elapsed_ms = elapsed * 1e3,
                        "request done"
                    );
                }
            });
            if let Some(value) = header {
                res.headers_mut().insert(REQUEST_ID, value);
            }
            Ok(res)
        }
        Err(err) => {
            let status = err.as_response_error().status_code();
            if let Some(metrics) = &metrics {
                metrics.observe_request("unmatched", method.as_str(), status.as_str(), elapsed);
            }
            Err(err)
        }
    }
}
