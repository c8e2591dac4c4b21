//! CSV fields (RFC 4180) for every export: quoted when they must be, and never read
//! as a formula by a spreadsheet (text starting with `=`, `+`, `-`, `@`, a tab or a
//! carriage return gets a leading `'`): names and notes are chosen by users.

use std::borrow::Cow;

/// One text field, quoted when it must be.
pub fn field(value: &str) -> Cow<'_, str> {
    let value: Cow<'_, str> = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{value}"))
    } else {
        Cow::Borrowed(value)
    };
    if value.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", value.replace('"', "\"\"")))
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn fields_are_quoted_and_formulas_defused() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=cmd()"), "'=cmd()");
        assert_eq!(field("-1+1,x"), "\"'-1+1,x\"");
    }
}
