//! The API's error policy.
//!
//! Every error a client sees is an [`ApiError`]: an HTTP status and a JSON body
//! `{"error": CODE, "message": TEXT}`, plus `"field": NAME` when one field of the
//! request (or one directive of a script) was refused. Client errors (4xx) say
//! exactly what was wrong with the request. Server errors (5xx) say nothing internal: the cause goes to the
//! log, with the request id that the response also carries.

use std::time::Duration;

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::services::ServiceError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// One field of the request (`script`, `array`, `environment` …) was refused.
    #[error("{message}")]
    InvalidField {
        field: &'static str,
        message: String,
    },
    /// One field of the request, named as it was nested (`matrix.params.BATCH`).
    #[error("{message}")]
    InvalidPath { field: String, message: String },
    /// Directives of a script were refused: `field` and `message` as for
    /// [`ApiError::InvalidField`] (the first, then the others), and every one by
    /// its line in `errors`.
    #[error("{message}")]
    InvalidLines {
        field: &'static str,
        message: String,
        errors: Vec<crate::sched::submission::LineError>,
    },
    #[error("authentication required")]
    Unauthorized,
    #[error("invalid username or password")]
    InvalidCredentials,
    #[error("{0}")]
    Forbidden(String),
    /// The request would go over a quota: names it, its value and the use now.
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error("request body too large (limit {limit} bytes)")]
    PayloadTooLarge { limit: usize },
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("too many failed attempts; try again in {} s", .retry_after.as_secs())]
    TooManyRequests { retry_after: Duration },
    /// The queue holds its most jobs (`MaxJobCount`): 429, try again later.
    #[error("{0}")]
    QueueFull(String),
    #[error("{0}")]
    Unavailable(String),
    /// The scheduler is rebuilding its queue after a restart (a few seconds with a
    /// large queue): 503 with `Retry-After`, saying so.
    #[error("the scheduler is restoring its queue after a restart; try again in {} s", .retry_after.as_secs())]
    Restoring { retry_after: Duration },
    /// Too much work of one kind in progress (password checks, one user's file
    /// operations): try again shortly.
    #[error("{what}; try again in {} s", .retry_after.as_secs())]
    Busy { what: String, retry_after: Duration },
    /// A session's server did not answer the proxy.
    #[error("{0}")]
    BadGateway(String),
    /// Not available on this portal (its scheduler backend does not answer it): 501,
    /// saying what to use instead.
    #[error("{0}")]
    NotImplemented(String),
    /// The LDAP directory does not answer: logins cannot be checked.
    #[error("the directory is unavailable; try again shortly")]
    DirectoryUnavailable,
    /// A page needs a login: answered with a redirect to the login page.
    #[error("login required")]
    LoginRequired { next: String },
    #[error("internal error")]
    Internal(String),
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    /// Every refused directive of a script: `[{line, directive, message}]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a [crate::sched::submission::LineError]>,
}

impl ApiError {
    /// `field` of the request was refused; `message` says why. Every 400 names its
    /// field: a query parameter, a body's field, `body` for the body as a whole.
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Self::InvalidField {
            field,
            message: message.into(),
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::Forbidden(message.into())
    }

    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::Internal(cause.to_string())
    }

    /// The scheduler is still restoring its queue: come back in a couple of seconds.
    pub fn restoring() -> Self {
        Self::Restoring {
            retry_after: Duration::from_secs(2),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidField { .. } | Self::InvalidPath { .. } | Self::InvalidLines { .. } => {
                "bad_request"
            }
            Self::Unauthorized | Self::LoginRequired { .. } => "unauthorized",
            Self::InvalidCredentials => "invalid_credentials",
            Self::Forbidden(_) => "forbidden",
            Self::QuotaExceeded(_) => "quota_exceeded",
            Self::QueueFull(_) => "queue_full",
            Self::NotFound => "not_found",
            Self::Conflict(_) => "conflict",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::TooManyRequests { .. } => "rate_limited",
            Self::Unavailable(_) | Self::DirectoryUnavailable => "unavailable",
            Self::Busy { .. } => "busy",
            Self::Restoring { .. } => "restoring",
            Self::BadGateway(_) => "bad_gateway",
            Self::NotImplemented(_) => "not_implemented",
            Self::Internal(_) => "internal",
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::InvalidField { .. } | Self::InvalidPath { .. } | Self::InvalidLines { .. } => {
                StatusCode::BAD_REQUEST
            }
            Self::Unauthorized | Self::InvalidCredentials => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::QuotaExceeded(_) => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooManyRequests { .. } | Self::QueueFull(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_)
            | Self::DirectoryUnavailable
            | Self::Busy { .. }
            | Self::Restoring { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::BadGateway(_) => StatusCode::BAD_GATEWAY,
            Self::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            Self::LoginRequired { .. } => StatusCode::SEE_OTHER,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        match self {
            Self::LoginRequired { next } => {
                let location = format!("/login?next={}", urlencode(next));
                return response
                    .insert_header((header::LOCATION, location))
                    .finish();
            }
            Self::Internal(cause) => {
                tracing::error!(cause = %cause, "internal error");
            }
            Self::Unavailable(cause) => {
                tracing::warn!(cause = %cause, "service unavailable");
            }
            Self::TooManyRequests { retry_after }
            | Self::Busy { retry_after, .. }
            | Self::Restoring { retry_after } => {
                response.insert_header((header::RETRY_AFTER, retry_after.as_secs().to_string()));
            }
            Self::QueueFull(_) => {
                response.insert_header((header::RETRY_AFTER, "60"));
            }
            Self::Unauthorized => {
                response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
            }
            _ => {}
        }
        let message = match self {
            Self::Internal(_) => {
                "internal error; the request id is in the x-request-id header".into()
            }
            Self::Unavailable(_) => {
                "a service the portal depends on is unavailable; try again shortly".into()
            }
            other => other.to_string(),
        };
        let field = match self {
            Self::InvalidField { field, .. } | Self::InvalidLines { field, .. } => Some(*field),
            Self::InvalidPath { field, .. } => Some(field.as_str()),
            _ => None,
        };
        let errors = match self {
            Self::InvalidLines { errors, .. } => Some(errors.as_slice()),
            _ => None,
        };
        response.json(Body {
            error: self.code(),
            message,
            field,
            errors,
        })
    }
}

/// Every service's error reaches HTTP as a [`ServiceError`], and so does what the
/// services' errors are made of (the store's, the scheduler's, sessions', quotas',
/// tokens'): their one table of statuses is the services' `From` impls and this.
impl<E: Into<ServiceError>> From<E> for ApiError {
    fn from(e: E) -> Self {
        use crate::services::ServiceError as E;
        match e.into() {
            E::Invalid { field, message } => Self::InvalidField { field, message },
            E::InvalidPath { field, message } => Self::InvalidPath { field, message },
            E::InvalidLines {
                field,
                message,
                errors,
            } => Self::InvalidLines {
                field,
                message,
                errors,
            },
            E::Forbidden(m) => Self::Forbidden(m),
            E::NotFound => Self::NotFound,
            E::Conflict(m) => Self::Conflict(m),
            E::QuotaExceeded(m) => Self::QuotaExceeded(m),
            E::Unavailable(m) => Self::Unavailable(m),
            E::Full(m) => Self::QueueFull(m),
            E::Busy(what) => Self::Busy {
                what,
                retry_after: Duration::from_secs(2),
            },
            E::Restoring => Self::restoring(),
            E::NotSupported(m) => Self::NotImplemented(m),
            E::Internal(cause) => Self::Internal(cause),
        }
    }
}

/// Map a JSON body error to a client error naming the problem.
pub fn json_error(err: actix_web::error::JsonPayloadError, limit: usize) -> ApiError {
    use actix_web::error::JsonPayloadError as E;
    match err {
        E::Overflow { .. } | E::OverflowKnownLength { .. } => ApiError::PayloadTooLarge { limit },
        E::ContentType => {
            ApiError::UnsupportedMediaType("expected Content-Type: application/json".into())
        }
        E::Deserialize(e) if e.is_data() => {
            ApiError::invalid("body", format!("invalid request: {e}"))
        }
        E::Deserialize(e) => ApiError::invalid("body", format!("malformed JSON: {e}")),
        other => ApiError::invalid("body", format!("cannot read the request body: {other}")),
    }
}

/// A query string error as a client error naming the parameter at `path` (`page`;
/// `.` when the deserializer was not inside one: an unknown or repeated parameter,
/// named from its words), else `query`. Every typed query is read through
/// `http::query::Query`, which calls this.
pub fn query_error_at(path: &str, err: &dyn std::fmt::Display) -> ApiError {
    if !path.is_empty() && path != "." && path != "?" {
        let field: String = path.chars().take(64).collect();
        return ApiError::InvalidPath {
            message: format!("{field}: {err}"),
            field,
        };
    }
    let message = format!("query: {err}");
    match named_field(&message) {
        Some(field) => ApiError::InvalidPath { field, message },
        None => ApiError::invalid("query", message),
    }
}

/// The field a deserializer's message names (`unknown field `x``).
fn named_field(message: &str) -> Option<String> {
    let (_, rest) = message.split_once("field `")?;
    let (name, _) = rest.split_once('`')?;
    Some(name.chars().take(64).collect())
}

/// Map a form body error to a client error.
pub fn form_error(err: actix_web::error::UrlencodedError, limit: usize) -> ApiError {
    use actix_web::error::UrlencodedError as E;
    match err {
        E::Overflow { .. } => ApiError::PayloadTooLarge { limit },
        E::ContentType => ApiError::UnsupportedMediaType(
            "expected Content-Type: application/x-www-form-urlencoded".into(),
        ),
        other => ApiError::invalid("body", format!("invalid form: {other}")),
    }
}

/// Percent-encode a path for a query parameter.
pub fn urlencode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_error_names_its_field() {
        assert_eq!(
            named_field("query: unknown field `bogus`, expected one of `ids`"),
            Some("bogus".into())
        );
        assert_eq!(named_field("query: invalid digit"), None);
    }

    #[test]
    fn what_a_backend_does_not_answer_is_501_saying_what_to_use() {
        let error = ApiError::from(crate::sched::SchedError::NotSupported(
            "not available with the Slurm backend: use Slurm's own sprio".into(),
        ));
        assert_eq!(error.code(), "not_implemented");
        let response = error.error_response();
        assert_eq!(response.status().as_u16(), 501);
        let body = actix_web::body::to_bytes(response.into_body());
        let body = futures_util::FutureExt::now_or_never(body)
            .and_then(Result::ok)
            .expect("a JSON body at once");
        assert!(String::from_utf8_lossy(&body).contains("Slurm's own sprio"));
    }

    #[test]
    fn an_unavailable_service_and_an_internal_error_tell_their_cause_to_the_log_only() {
        for (error, code) in [
            (
                ApiError::Unavailable("database: connection to 10.0.0.5:5432 refused".into()),
                503,
            ),
            (
                ApiError::internal("database: relation \"jobs\" does not exist"),
                500,
            ),
        ] {
            let response = error.error_response();
            assert_eq!(response.status().as_u16(), code);
            let body = actix_web::body::to_bytes(response.into_body());
            let body = futures_util::FutureExt::now_or_never(body)
                .and_then(Result::ok)
                .expect("a JSON body at once");
            let text = String::from_utf8_lossy(&body);
            assert!(!text.contains("database"), "{text}");
            assert!(!text.contains("10.0.0.5"), "{text}");
        }
    }
}
