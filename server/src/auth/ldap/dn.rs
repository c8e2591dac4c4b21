//! The one piece of DN parsing atrium needs: a group's name from its DN.

/// The value of the first RDN of `dn`, unescaped (`cn=gpu\2Cusers,ou=groups` →
/// `gpu,users`). `None` for a malformed DN.
pub fn first_rdn_value(dn: &str) -> Option<String> {
    let (_, rest) = dn.split_once('=')?;
    let mut out = Vec::new();
    let mut bytes = rest.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b',' | b'+' => break,
            b'\\' => {
                let first = bytes.next()?;
                if first.is_ascii_hexdigit() {
                    let second = bytes.next()?;
                    let hex = [first, second];
                    let text = std::str::from_utf8(&hex).ok()?;
                    out.push(u8::from_str_radix(text, 16).ok()?);
                } else {
                    out.push(first);
                }
            }
            other => out.push(other),
        }
    }
    let value = String::from_utf8(out).ok()?;
    let value = value.trim().to_string();
    (!value.is_empty()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::first_rdn_value;

    #[test]
    fn names_come_from_the_first_rdn() {
        assert_eq!(
            first_rdn_value("cn=gpu-users,ou=groups,dc=example,dc=org").as_deref(),
            Some("gpu-users")
        );
        assert_eq!(
            first_rdn_value("CN=Domain Admins,CN=Users,DC=corp").as_deref(),
            Some("Domain Admins")
        );
        assert_eq!(first_rdn_value("cn=a\\2Cb,ou=g").as_deref(), Some("a,b"));
        assert_eq!(
            first_rdn_value("cn=a\\,b\\+c,ou=g").as_deref(),
            Some("a,b+c")
        );
        assert_eq!(first_rdn_value("no-equals"), None);
        assert_eq!(first_rdn_value("cn=,ou=g"), None);
        assert_eq!(first_rdn_value("cn=bad\\"), None);
    }
}
