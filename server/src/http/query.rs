//! The query string as a request's typed parameters: actix's `web::Query`, read the
//! same way (`serde_urlencoded`), but a value it cannot take is named: `?page=abc`
//! is a 400 whose `field` is `page`, not only the deserializer's words.

use std::future::{ready, Ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest};
use serde::de::DeserializeOwned;

use super::error::query_error_at;
use super::ApiError;

/// A request's query string read as `T`; a refusal names the parameter.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<T> Query<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for Query<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: DeserializeOwned> FromRequest for Query<T> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(parse(req.query_string()).map(Query))
    }
}

/// `query` read as `T`, or a 400 naming the parameter it could not take.
pub fn parse<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let pairs = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(pairs).map_err(|e| {
        let path = e.path().to_string();
        query_error_at(&path, &e.into_inner())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Page {
        page: Option<u64>,
        state: Option<String>,
    }

    fn refusal(query: &str) -> (String, String) {
        match parse::<Page>(query) {
            Err(ApiError::InvalidPath { field, message }) => (field, message),
            Err(ApiError::InvalidField { field, message }) => (field.to_string(), message),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_value_that_cannot_be_read_names_its_parameter() {
        let (field, message) = refusal("state=R&page=abc");
        assert_eq!(field, "page");
        assert!(message.starts_with("page: "), "{message}");
        let (field, _) = refusal("bogus=1");
        assert_eq!(field, "bogus");
        let page = parse::<Page>("page=2&state=R%20S").expect("read");
        assert_eq!((page.page, page.state.as_deref()), (Some(2), Some("R S")));
    }
}
