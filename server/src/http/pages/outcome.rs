//! What a page shows when a service says no: the page's own error policy beside the
//! API's ([`ApiError`], which renders the same errors as JSON).
//!
//! Owns: the split of a service's error into not found (the not-found page), a
//! refusal the user can act on (the form or page again, with its values and the
//! reason) and a failure (the error as the API has it: a redirect to the login, a
//! 503 saying to retry, a 500).

use actix_web::http::StatusCode;
use actix_web::ResponseError;

use crate::http::ApiError;

/// A service's error, as a page handles it.
#[derive(Debug)]
pub enum PageError {
    /// Absent, or not the caller's to see: the not-found page.
    NotFound,
    /// A field of the form was refused: the form again (400), saying which and why.
    Invalid(String),
    /// Refused for a reason the user can act on (a conflict, a quota, not theirs to
    /// do, not on this portal): the page again, saying why. `status` is the API's
    /// for it; a page may answer every refusal alike.
    Refused { message: String, status: StatusCode },
    /// Anything else: answered as the API answers it.
    Failed(ApiError),
}

impl<E: Into<ApiError>> From<E> for PageError {
    fn from(e: E) -> Self {
        let e = e.into();
        match e {
            ApiError::NotFound => Self::NotFound,
            // A nested field is named: the form shows it whole.
            ApiError::InvalidPath { field, message } if !message.starts_with(&field) => {
                Self::Invalid(format!("{field}: {message}"))
            }
            ApiError::InvalidPath { .. }
            | ApiError::InvalidField { .. }
            | ApiError::InvalidLines { .. } => Self::Invalid(e.to_string()),
            ApiError::Forbidden(_)
            | ApiError::QuotaExceeded(_)
            | ApiError::Conflict(_)
            | ApiError::QueueFull(_)
            | ApiError::NotImplemented(_) => Self::Refused {
                message: e.to_string(),
                status: e.status_code(),
            },
            other => Self::Failed(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::ServiceError;

    #[test]
    fn not_found_refusals_and_failures_are_told_apart() {
        assert!(matches!(
            PageError::from(ServiceError::NotFound),
            PageError::NotFound
        ));
        match PageError::from(ServiceError::Invalid {
            field: "name",
            message: "name: too long".into(),
        }) {
            PageError::Invalid(m) => assert_eq!(m, "name: too long"),
            other => panic!("{other:?}"),
        }
        for (refusal, code) in [
            (ServiceError::Conflict("the job has ended".into()), 409),
            (
                ServiceError::QuotaExceeded("gpus: 2 of 2 in use".into()),
                403,
            ),
            (ServiceError::Forbidden("not yours".into()), 403),
        ] {
            let text = refusal.to_string();
            match PageError::from(refusal) {
                PageError::Refused { message, status } => {
                    assert_eq!(message, text);
                    assert_eq!(status.as_u16(), code);
                }
                other => panic!("{other:?}"),
            }
        }
        for failure in [
            ServiceError::Unavailable("database".into()),
            ServiceError::Restoring,
            ServiceError::Internal("bug".into()),
        ] {
            assert!(matches!(PageError::from(failure), PageError::Failed(_)));
        }
    }
}
