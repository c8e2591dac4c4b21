//! CSRF protection for state-changing form posts.
//!
//! Logged in, the token is bound to the login session (it travels inside the signed
//! session JWT, which scripts cannot read). Before login, the login form uses a
//! double-submit cookie. Comparisons are constant-time.

use subtle::ConstantTimeEq;

/// Cookie carrying the pre-login CSRF token.
pub const LOGIN_CSRF_COOKIE: &str = "atrium_login_csrf";
/// Header a script sends with cookie-authenticated API calls that change state.
pub const HEADER: &str = "x-csrf-token";

pub fn new_token() -> String {
    crate::util::random_text(24)
}

/// Whether `presented` matches `expected`; empty tokens never match.
pub fn matches(expected: &str, presented: &str) -> bool {
    !expected.is_empty()
        && expected.len() == presented.len()
        && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_equal_non_empty_tokens_match() {
        assert!(super::matches("abc", "abc"));
        assert!(!super::matches("abc", "abd"));
        assert!(!super::matches("abc", "ab"));
        assert!(!super::matches("", ""));
    }
}
