//! `--dependency` expressions: `after`, `afterany`, `afterok`, `afternotok`,
//! `singleton`, joined by `,` (all) or `?` (any).

use crate::model::{DepKind, DepTarget, Dependency, DependencyItem, JobId};
use std::fmt;
use std::str::FromStr;

pub(crate) const DEP_EXPECTED: &str =
    "type:jobid[:jobid...] with type after, afterany, afterok, afternotok, or singleton, joined by , or ?";

impl FromStr for Dependency {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected {DEP_EXPECTED}, got \"{s}\"");
        let any = s.contains('?');
        if any && s.contains(',') {
            return Err(format!("cannot mix , and ? in \"{s}\""));
        }
        let mut items = Vec::new();
        for part in s.split([',', '?']) {
            if part == "singleton" {
                items.push(DependencyItem {
                    kind: DepKind::Singleton,
                    targets: Vec::new(),
                });
                continue;
            }
            let mut it = part.split(':');
            let kind = match it.next() {
                Some("after") => DepKind::After,
                Some("afterany") => DepKind::AfterAny,
                Some("afterok") => DepKind::AfterOk,
                Some("afternotok") => DepKind::AfterNotOk,
                _ => return Err(bad()),
            };
            let mut targets = Vec::new();
            for t in it {
                let (id, delay) = match t.split_once('+') {
                    Some((id, m)) if kind == DepKind::After => {
                        let mins: u64 = m
                            .parse()
                            .ok()
                            .filter(|_| m.bytes().all(|b| b.is_ascii_digit()))
                            .ok_or_else(bad)?;
                        (id, mins * 60)
                    }
                    Some(_) => return Err(bad()),
                    None => (t, 0),
                };
                if id.is_empty() || id.starts_with('+') || id.starts_with('-') {
                    return Err(bad());
                }
                let job: JobId = id.parse().map_err(|_| bad())?;
                targets.push(DepTarget {
                    job,
                    delay_secs: delay,
                });
            }
            if targets.is_empty() {
                return Err(bad());
            }
            items.push(DependencyItem { kind, targets });
        }
        Ok(Dependency { any, items })
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                f.write_str(if self.any { "?" } else { "," })?;
            }
            f.write_str(match item.kind {
                DepKind::After => "after",
                DepKind::AfterAny => "afterany",
                DepKind::AfterOk => "afterok",
                DepKind::AfterNotOk => "afternotok",
                DepKind::Singleton => "singleton",
            })?;
            for t in &item.targets {
                write!(f, ":{}", t.job)?;
                if t.delay_secs > 0 {
                    write!(f, "+{}", t.delay_secs / 60)?;
                }
            }
        }
        Ok(())
    }
}

impl TryFrom<String> for Dependency {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
impl From<Dependency> for String {
    fn from(d: Dependency) -> String {
        d.to_string()
    }
}
