//! A configured list of groups (`auth.admin_groups`) and whether a user's groups meet
//! it. Directory groups are kept apart from local ones:
//! - a DN (`cn=gpu-admins,ou=groups,dc=example,dc=org`) names that directory group,
//!   compared on the normalised DN (case and escaping do not matter);
//! - a plain name (`admin`) names the local group of that name, given in the portal
//!   (`atrium user add --admin`, `--group`). It never matches a directory group, whatever
//!   the directory group is called: any `cn=admin` anywhere in the directory would
//!   otherwise make administrators.

use super::dn;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupList {
    local: Vec<String>,
    /// Normalised DNs.
    directory: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither a group name nor a well-formed DN")]
pub struct BadGroup(pub String);

impl GroupList {
    pub fn parse(entries: &[String]) -> Result<Self, BadGroup> {
        let mut list = GroupList::default();
        for entry in entries {
            let entry = entry.trim();
            if entry.is_empty() {
                return Err(BadGroup(entry.to_string()));
            }
            if dn::looks_like_dn(entry) {
                let normal = dn::normalise(entry).ok_or_else(|| BadGroup(entry.to_string()))?;
                list.directory.push(normal);
            } else {
                list.local.push(entry.to_string());
            }
        }
        Ok(list)
    }

    /// Local group names.
    pub fn local(&self) -> &[String] {
        &self.local
    }

    /// Directory groups, as normalised DNs.
    pub fn directory(&self) -> &[String] {
        &self.directory
    }

    /// Whether a user with local groups `local` and directory groups `directory`
    /// (normalised DNs) belongs to one of the listed groups.
    pub fn matches(&self, local: &[String], directory: &[String]) -> bool {
        local.iter().any(|g| self.local.contains(g))
            || directory.iter().any(|g| self.directory.contains(g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> GroupList {
        GroupList::parse(&entries.iter().map(|e| e.to_string()).collect::<Vec<_>>()).expect("parse")
    }

    #[test]
    fn plain_names_are_local_and_dns_are_the_directorys() {
        let admins = list(&["admin", "CN=GPU-Admins, OU=Groups,DC=example,DC=org"]);
        assert_eq!(admins.local(), ["admin"]);
        assert_eq!(
            admins.directory(),
            ["cn=gpu-admins,ou=groups,dc=example,dc=org"]
        );
        let none: [String; 0] = [];
        assert!(admins.matches(&["admin".into()], &none));
        assert!(admins.matches(&none, &["cn=gpu-admins,ou=groups,dc=example,dc=org".into()]));
        // A directory group called admin, anywhere, is not the local group admin.
        assert!(!admins.matches(
            &none,
            &[
                "cn=admin,ou=projects,dc=example,dc=org".into(),
                "cn=admin,ou=groups,dc=example,dc=org".into()
            ]
        ));
        assert!(!admins.matches(&["gpu-admins".into()], &none));
    }

    #[test]
    fn malformed_entries_are_refused() {
        for bad in ["", "  ", "cn=a,,dc=org", "=x"] {
            assert_eq!(
                GroupList::parse(&[bad.to_string()]),
                Err(BadGroup(bad.trim().to_string())),
                "{bad:?}"
            );
        }
    }
}
