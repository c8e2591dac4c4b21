//! The pieces of DN handling atrium needs: a group's name from its DN, and DNs in one
//! normal form so that a configured group DN and the directory's spelling of it compare
//! equal (RFC 4514 escapes decoded, attribute types and values compared without case,
//! spaces around separators dropped).

/// The value of the first RDN of `dn`, unescaped (`cn=gpu\2Cusers,ou=groups` →
/// `gpu,users`). `None` for a malformed DN.
pub fn first_rdn_value(dn: &str) -> Option<String> {
    let first = parse(dn)?.into_iter().next()?;
    let (_, value) = first.into_iter().next()?;
    let value = value.trim().to_string();
    (!value.is_empty()).then_some(value)
}

/// `dn` in normal form: `CN=GPU Admins , OU=Groups,dc=Example,dc=org` and
/// `cn=gpu admins,ou=groups,dc=example,dc=org` give the same text. `None` for a
/// malformed DN.
pub fn normalise(dn: &str) -> Option<String> {
    let rdns = parse(dn)?;
    let text: Vec<String> = rdns
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|(kind, value)| format!("{}={}", kind, escape(&value.to_lowercase())))
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Some(text.join(","))
}

/// Whether `text` is written as a DN (`attribute=value,…`) rather than a plain name.
pub fn looks_like_dn(text: &str) -> bool {
    text.contains('=')
}

/// `value` escaped for use as an RDN value (RFC 4514 §2.4).
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let edge_space = c == ' ' && (i == 0 || i == last);
        if matches!(c, '\\' | ',' | '+' | '"' | '<' | '>' | ';' | '=')
            || edge_space
            || (i == 0 && c == '#')
        {
            out.push('\\');
            out.push(c);
        } else if c == '\0' {
            out.push_str("\\00");
        } else {
            out.push(c);
        }
    }
    out
}

/// One RDN: its attribute-type and value pairs, types lowercased, values unescaped.
type Rdn = Vec<(String, String)>;

/// `dn` split into RDNs. Empty DNs, empty RDNs, missing `=`, empty types and bad
/// escapes are malformed.
fn parse(dn: &str) -> Option<Vec<Rdn>> {
    let mut rdns = Vec::new();
    let mut rdn: Rdn = Vec::new();
    let mut kind: Option<String> = None;
    let mut value: Vec<u8> = Vec::new();
    // Length of `value` up to its last escaped byte: later unescaped spaces are trimmed.
    let mut kept = 0;
    let mut current: Vec<u8> = Vec::new();
    let bytes = dn.as_bytes();
    let mut i = 0;
    let finish_ava = |kind: &mut Option<String>,
                      value: &mut Vec<u8>,
                      kept: &mut usize,
                      rdn: &mut Rdn|
     -> Option<()> {
        let k = kind.take()?;
        let mut v = std::mem::take(value);
        while v.len() > *kept && v.last() == Some(&b' ') {
            v.pop();
        }
        rdn.push((k, String::from_utf8(v).ok()?));
        *kept = 0;
        Some(())
    };
    while i < bytes.len() {
        let b = bytes[i];
        match (kind.is_some(), b) {
            (false, b'=') => {
                let k = std::str::from_utf8(&current)
                    .ok()?
                    .trim()
                    .to_ascii_lowercase();
                if k.is_empty() {
                    return None;
                }
                kind = Some(k);
                current.clear();
            }
            (false, b',' | b'+') => return None,
            (false, _) => current.push(b),
            (true, b'\\') => {
                let first = *bytes.get(i + 1)?;
                if first.is_ascii_hexdigit() {
                    let second = *bytes.get(i + 2)?;
                    let hex = [first, second];
                    value.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
                    i += 2;
                } else {
                    value.push(first);
                    i += 1;
                }
                kept = value.len();
            }
            (true, b',' | b'+') => {
                finish_ava(&mut kind, &mut value, &mut kept, &mut rdn)?;
                if b == b',' {
                    rdns.push(std::mem::take(&mut rdn));
                }
            }
            (true, b' ') if value.is_empty() => {}
            (true, _) => value.push(b),
        }
        i += 1;
    }
    // A last AVA with no `=` has no kind: malformed.
    finish_ava(&mut kind, &mut value, &mut kept, &mut rdn)?;
    rdns.push(rdn);
    Some(rdns)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn spellings_of_one_dn_normalise_alike() {
        let want = Some("cn=gpu admins,ou=groups,dc=example,dc=org".to_string());
        for dn in [
            "cn=gpu admins,ou=groups,dc=example,dc=org",
            "CN=GPU Admins,OU=Groups,DC=Example,DC=Org",
            "cn = gpu admins , ou=groups,  dc=example,dc=org",
            "cn=gpu\\20admins,ou=groups,dc=example,dc=org",
            "cn=gpu\\ admins,ou=groups,dc=example,dc=org",
        ] {
            assert_eq!(normalise(dn), want, "{dn}");
        }
        assert_eq!(
            normalise("cn=a\\2Cb,ou=g").as_deref(),
            Some("cn=a\\,b,ou=g"),
            "escapes are written one way"
        );
        assert_eq!(normalise("cn=a\\,b,ou=g"), normalise("cn=a\\2cb,ou=g"));
        assert_ne!(
            normalise("cn=admin,ou=groups,dc=example,dc=org"),
            normalise("cn=admin,ou=projects,dc=example,dc=org")
        );
        assert_ne!(normalise("cn=a\\,ou=b"), normalise("cn=a,ou=b"));
        assert_eq!(
            normalise("cn=x+uid=y,dc=org").as_deref(),
            Some("cn=x+uid=y,dc=org")
        );
        assert_eq!(
            normalise("cn=\\ lead,dc=org").as_deref(),
            Some("cn=\\ lead,dc=org")
        );
        for bad in [
            "",
            "admin",
            "cn=a,,dc=org",
            "=a,dc=org",
            "cn=a,dc",
            "cn=bad\\",
        ] {
            assert_eq!(normalise(bad), None, "{bad}");
        }
    }

    #[test]
    fn values_are_escaped_for_rdns() {
        assert_eq!(escape("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape(" x "), "\\ x\\ ");
        assert_eq!(escape("#x#"), "\\#x#");
        assert_eq!(
            normalise(&format!("cn={},dc=org", escape("Eve, \"Q\""))),
            normalise("cn=eve\\2C \\\"q\\\",dc=org")
        );
    }
}
