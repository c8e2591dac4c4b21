//! Bounds on what a job request may say. Owns every limit the parser applies to a
//! user's text before it is expanded, copied or stored: the size of one directive
//! and the number of them, names, paths and what a path pattern expands to, host
//! lists, and the array size (Slurm's `MaxArraySize`, the one bound a site sets).
//! Each limit is checked on the text as written, before the work it would cost.

use std::fmt;

/// Longest `#SBATCH` line, or one option with its value, in bytes.
pub const MAX_DIRECTIVE_BYTES: usize = 8192;
/// Most options the `#SBATCH` lines of one script (or one option list) may give.
pub const MAX_DIRECTIVES: usize = 256;
/// Longest job name, partition, account or QOS, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Longest `--comment`, in bytes.
pub const MAX_COMMENT_BYTES: usize = 1024;
/// Longest path (Linux `PATH_MAX`): `--chdir`, the `-o`/`-e` patterns, and what a
/// pattern expands to.
pub const PATH_MAX: usize = 4096;
/// Most names one host list (`--nodelist`, `--exclude`) may expand to.
pub const MAX_HOSTS: usize = 8192;
/// Longest host name (Linux `HOST_NAME_MAX`), as written or expanded.
pub const MAX_HOST_NAME_BYTES: usize = 64;

/// Slurm's `MaxArraySize`: every task index of an array must be below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MaxArraySize(u32);

impl MaxArraySize {
    /// Slurm's default: indices 0 to 1000.
    pub const DEFAULT: MaxArraySize = MaxArraySize(1001);
    /// The largest a site may configure (Slurm's own ceiling); also what a stored
    /// request is read back with.
    pub const CEILING: MaxArraySize = MaxArraySize(4_000_001);

    /// A size from 1 to [`MaxArraySize::CEILING`].
    pub fn new(size: u32) -> Result<Self, String> {
        if (1..=Self::CEILING.0).contains(&size) {
            Ok(MaxArraySize(size))
        } else {
            Err(format!("must be from 1 to {}, got {size}", Self::CEILING.0))
        }
    }

    /// The size: task indices are `0..get()`.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for MaxArraySize {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for MaxArraySize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The limits a site configures for what submissions may ask (the rest are the
/// constants of this module).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseLimits {
    pub max_array_size: MaxArraySize,
}

/// `Err` naming `what` when `v` is longer than `max` bytes.
pub(crate) fn at_most(what: &str, v: &str, max: usize) -> Result<(), String> {
    if v.len() > max {
        Err(format!(
            "{what} is {} bytes long; at most {max} are allowed",
            v.len()
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::ArraySpec;
    use crate::parse::{expand_hostlist, parse_args, parse_script, parse_script_with};

    fn script(lines: &[String]) -> String {
        let mut s = String::from("#!/bin/bash\n");
        for l in lines {
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("true\n");
        s
    }

    fn refused(line: &str) -> crate::parse::ParseError {
        parse_script(&script(&[line.to_string()])).unwrap_err()
    }

    #[test]
    fn array_indices_must_be_below_max_array_size() {
        let r = parse_script(&script(&["#SBATCH --array=0-1000".into()])).unwrap();
        assert_eq!(r.array.unwrap().len(), 1001);
        let e = refused("#SBATCH --array=0-1001");
        assert_eq!((e.field, e.directive.as_str()), ("array", "--array"));
        assert!(e.message.contains("MaxArraySize is 1001"), "{e}");
        assert_eq!(refused("#SBATCH -a 5,1001%2").field, "array");
        let big = ParseLimits {
            max_array_size: MaxArraySize::new(5000).unwrap(),
        };
        let r = parse_script_with(&script(&["#SBATCH -a 4999".into()]), &big).unwrap();
        assert_eq!(r.array.unwrap().indices().collect::<Vec<_>>(), [4999]);
        assert!(MaxArraySize::new(0).is_err());
        assert!(MaxArraySize::new(4_000_002).is_err());
        assert_eq!(MaxArraySize::new(4_000_001), Ok(MaxArraySize::CEILING));
    }

    #[test]
    fn overlapping_arrays_are_merged_within_max_array_size() {
        // Many overlapping full ranges: the union, not the sum.
        let parts = vec!["0-1000"; 500].join(",");
        let a = ArraySpec::parse(&parts, MaxArraySize::DEFAULT).unwrap();
        assert_eq!(a.ranges, [(0, 1000, 1)]);
        let a = ArraySpec::parse("0-20:2,1-21:2,5", MaxArraySize::DEFAULT).unwrap();
        assert_eq!(a.ranges, [(0, 21, 1)]);
        let a = ArraySpec::parse("0-9:3,3,20-30:5", MaxArraySize::DEFAULT).unwrap();
        assert_eq!(a.indices().collect::<Vec<_>>(), [0, 3, 6, 9, 20, 25, 30]);
        let a = ArraySpec::parse("1,3,4,5", MaxArraySize::DEFAULT).unwrap();
        assert_eq!(a.indices().collect::<Vec<_>>(), [1, 3, 4, 5]);
        assert_eq!(a.to_string().parse::<ArraySpec>().unwrap(), a);
        // At the ceiling, a union is still computed in bits, not indices.
        let a = ArraySpec::parse("0-4000000,0-4000000:7", MaxArraySize::CEILING).unwrap();
        assert_eq!((a.len(), a.ranges.len()), (4_000_001, 1));
        assert_eq!(a.bounds(), Some((0, 4_000_000)));
        assert!(a.fits(MaxArraySize::CEILING) && !a.fits(MaxArraySize::DEFAULT));
    }

    #[test]
    fn directives_are_bounded_in_length_and_number() {
        let long = format!("#SBATCH --comment={}", "c".repeat(MAX_DIRECTIVE_BYTES));
        let e = refused(&long);
        assert_eq!((e.field, e.line), ("script", 2));
        let many: Vec<String> = (0..=MAX_DIRECTIVES).map(|_| "#SBATCH -H".into()).collect();
        let e = parse_script(&script(&many)).unwrap_err();
        assert_eq!(e.field, "script");
        assert!(e.message.contains("directives"), "{e}");
        let fine: Vec<String> = (0..MAX_DIRECTIVES).map(|_| "#SBATCH -H".into()).collect();
        assert!(parse_script(&script(&fine)).is_ok());
        let words = vec!["--hold"; MAX_DIRECTIVES + 1];
        assert_eq!(parse_args(&words).unwrap_err().field, "options");
        let word = format!("--comment={}", "c".repeat(MAX_DIRECTIVE_BYTES));
        assert_eq!(parse_args(&[word]).unwrap_err().field, "options");
    }

    #[test]
    fn names_comments_and_paths_are_bounded() {
        let at = |n: usize| "x".repeat(n);
        for (opt, field, max) in [
            ("-J", "job-name", MAX_NAME_BYTES),
            ("-p", "partition", MAX_NAME_BYTES),
            ("-A", "account", MAX_NAME_BYTES),
            ("-q", "qos", MAX_NAME_BYTES),
            ("--comment", "comment", MAX_COMMENT_BYTES),
            ("-o", "output", PATH_MAX),
            ("-e", "error", PATH_MAX),
            ("-D", "chdir", PATH_MAX),
        ] {
            assert!(parse_args(&[opt, &at(max)]).is_ok(), "{opt}");
            let e = parse_args(&[opt, &at(max + 1)]).unwrap_err();
            assert_eq!(e.field, field, "{opt}");
            assert!(e.message.contains(&max.to_string()), "{e}");
        }
    }

    #[test]
    fn output_patterns_are_bounded_after_expansion() {
        let cx = crate::parse::PatternContext {
            job: crate::model::JobId::new(1),
            user: "u",
            name: &"n".repeat(MAX_NAME_BYTES),
            node: "n1",
        };
        let pattern = "%x".repeat(PATH_MAX / 2);
        let e = crate::parse::expand_pattern(&pattern, &cx).unwrap_err();
        assert!(e.contains("PATH_MAX"), "{e}");
        let fits = "%x".repeat(PATH_MAX / MAX_NAME_BYTES);
        assert_eq!(
            crate::parse::expand_pattern(&fits, &cx).unwrap().len(),
            PATH_MAX
        );
    }

    #[test]
    fn hostlists_are_bounded_in_names_and_name_length() {
        let hosts = expand_hostlist(&format!("n[1-{MAX_HOSTS}]")).unwrap();
        assert_eq!(hosts.len(), MAX_HOSTS);
        let e = expand_hostlist(&format!("n[1-{}]", MAX_HOSTS + 1)).unwrap_err();
        assert!(e.contains("at most"), "{e}");
        let e = expand_hostlist("n[0-999999999]").unwrap_err();
        assert!(e.contains("at most"), "{e}");
        let prefix = "p".repeat(MAX_HOST_NAME_BYTES);
        let e = expand_hostlist(&format!("{prefix}[1-2]")).unwrap_err();
        assert!(e.contains("host name"), "{e}");
        assert!(expand_hostlist(&"h".repeat(MAX_HOST_NAME_BYTES + 1)).is_err());
        let plain: Vec<String> = (0..=MAX_HOSTS).map(|i| format!("h{i}")).collect();
        assert!(expand_hostlist(&plain.join(",")).is_err());
        let e = refused(&format!("#SBATCH -w n[1-{}]", MAX_HOSTS + 1));
        assert_eq!(e.field, "nodelist");
        let e = refused(&format!("#SBATCH --exclude={prefix}1"));
        assert_eq!(e.field, "exclude");
    }
}
