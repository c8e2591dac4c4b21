//! Command lines read as Slurm's commands read theirs: glibc's `getopt_long`, so that
//! what programs type works unchanged and what they get wrong is reported in the same
//! words, with the same exit status.
//!
//! - Options and operands may mix (`squeue -o %i 13 -j`): operands are collected in
//!   order; `--` ends the options. A command that takes a command line of its own
//!   (`srun`, `salloc`) stops at its first operand instead ([`Parser::in_order`]).
//! - Short options bundle (`-hj1`, `-ho%i`); a required value is attached (`-o%i`) or
//!   the next word (`-o %i`, even when it starts with `-`); an optional value only
//!   attached (`-j1`, `--jobs=1`: `-j 1` leaves `1` an operand).
//! - A long option may be any unambiguous prefix of its name (`--noh`); an exact name
//!   wins over longer ones; names that mean the same option are not ambiguous
//!   (`--node` for `nodes`/`nodelist`). An ambiguous prefix lists the candidates as
//!   glibc 2.36 does: the first match, then each later one that means another option.
//! - Mistakes read as glibc prints them (`squeue: unrecognized option '--bogus'`).
//!
//! Pure: no environment, no output. Written here because no crate reproduces glibc's
//! prefix and ambiguity rules and messages, which programs (and people) meet.

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HasArg {
    No,
    Required,
    /// Only attached: `-jVALUE`, `--jobs=VALUE`.
    Optional,
}

/// One option: the key it is known by in the program, its short letter, its long
/// names (in the command's table order) and whether it takes a value.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    pub key: &'static str,
    pub short: Option<char>,
    pub long: &'static [&'static str],
    pub arg: HasArg,
}

impl Opt {
    pub const fn new(
        key: &'static str,
        short: Option<char>,
        long: &'static [&'static str],
        arg: HasArg,
    ) -> Opt {
        Opt {
            key,
            short,
            long,
            arg,
        }
    }
}

/// One option found, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub key: &'static str,
    pub value: Option<String>,
}

/// A command line read: its options in order and its operands in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub options: Vec<Found>,
    pub operands: Vec<String>,
}

impl Parsed {
    /// Whether `key` was given at all.
    pub fn has(&self, key: &str) -> bool {
        self.options.iter().any(|o| o.key == key)
    }

    /// The last value of `key` (a later option overrides an earlier one).
    pub fn last(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|o| o.key == key)
            .and_then(|o| o.value.as_deref())
    }

    /// Every value of `key`, in order (lists that add up: `-j 2 -j 3`).
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.options
            .iter()
            .filter(|o| o.key == key)
            .filter_map(|o| o.value.as_deref())
            .collect()
    }
}

/// A mistake on the command line, as glibc words it (without the program's name,
/// which [`GetoptError::line`] adds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetoptError {
    UnknownLong(String),
    UnknownShort(char),
    Ambiguous {
        typed: String,
        candidates: Vec<&'static str>,
    },
    LongNeedsValue(&'static str),
    ShortNeedsValue(char),
    LongTakesNoValue(&'static str),
}

impl GetoptError {
    /// The line glibc prints, with `program` as the command was typed (`argv[0]`).
    pub fn line(&self, program: &str) -> String {
        match self {
            GetoptError::UnknownLong(typed) => {
                format!("{program}: unrecognized option '--{typed}'")
            }
            GetoptError::UnknownShort(c) => format!("{program}: invalid option -- '{c}'"),
            GetoptError::Ambiguous { typed, candidates } => {
                let list: Vec<String> = candidates.iter().map(|c| format!("'--{c}'")).collect();
                format!(
                    "{program}: option '--{typed}' is ambiguous; possibilities: {}",
                    list.join(" ")
                )
            }
            GetoptError::LongNeedsValue(name) => {
                format!("{program}: option '--{name}' requires an argument")
            }
            GetoptError::ShortNeedsValue(c) => {
                format!("{program}: option requires an argument -- '{c}'")
            }
            GetoptError::LongTakesNoValue(name) => {
                format!("{program}: option '--{name}' doesn't allow an argument")
            }
        }
    }
}

/// A command's option table.
#[derive(Debug, Clone, Copy)]
pub struct Parser {
    pub options: &'static [Opt],
    /// Stop at the first operand: the rest is a command line of its own (`srun cmd
    /// -x`), as getopt does with `+` or `POSIXLY_CORRECT`.
    pub in_order: bool,
}

impl Parser {
    pub const fn new(options: &'static [Opt]) -> Parser {
        Parser {
            options,
            in_order: false,
        }
    }

    pub const fn in_order(options: &'static [Opt]) -> Parser {
        Parser {
            options,
            in_order: true,
        }
    }

    /// Read `args` (without the program's name).
    pub fn parse<S: AsRef<str>>(&self, args: &[S]) -> Result<Parsed, GetoptError> {
        let mut out = Parsed::default();
        let mut i = 0;
        while i < args.len() {
            let word = args[i].as_ref();
            i += 1;
            if word == "--" {
                out.operands
                    .extend(args[i..].iter().map(|a| a.as_ref().to_string()));
                break;
            }
            if let Some(long) = word.strip_prefix("--") {
                let (found, used) = self.long(long, args.get(i).map(AsRef::as_ref))?;
                i += used;
                out.options.push(found);
            } else if word.len() > 1 && word.starts_with('-') {
                i += self.shorts(&word[1..], args.get(i).map(AsRef::as_ref), &mut out)?;
            } else if self.in_order {
                out.operands
                    .extend(args[i - 1..].iter().map(|a| a.as_ref().to_string()));
                break;
            } else {
                out.operands.push(word.to_string());
            }
        }
        Ok(out)
    }

    /// One `--name[=value]`; how many following words it took as its value.
    fn long(&self, typed: &str, next: Option<&str>) -> Result<(Found, usize), GetoptError> {
        let (name, attached) = match typed.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (typed, None),
        };
        let (opt, full) = self.resolve(typed, name)?;
        match (opt.arg, attached) {
            (HasArg::No, Some(_)) => Err(GetoptError::LongTakesNoValue(full)),
            (HasArg::No, None) => Ok((
                Found {
                    key: opt.key,
                    value: None,
                },
                0,
            )),
            (_, Some(v)) => Ok((
                Found {
                    key: opt.key,
                    value: Some(v.to_string()),
                },
                0,
            )),
            (HasArg::Optional, None) => Ok((
                Found {
                    key: opt.key,
                    value: None,
                },
                0,
            )),
            (HasArg::Required, None) => match next {
                Some(v) => Ok((
                    Found {
                        key: opt.key,
                        value: Some(v.to_string()),
                    },
                    1,
                )),
                None => Err(GetoptError::LongNeedsValue(full)),
            },
        }
    }

    /// The option a long name (or prefix of one) means, and its full name.
    fn resolve(
        &self,
        typed: &str,
        name: &str,
    ) -> Result<(&'static Opt, &'static str), GetoptError> {
        let table = self
            .options
            .iter()
            .flat_map(|o| o.long.iter().map(move |l| (o, *l)));
        let mut first: Option<(&'static Opt, &'static str)> = None;
        let mut others: Vec<&'static str> = Vec::new();
        for (opt, long) in table {
            if long == name {
                return Ok((opt, long));
            }
            if !name.is_empty() && long.starts_with(name) {
                match first {
                    None => first = Some((opt, long)),
                    Some((f, _)) if f.key != opt.key || f.arg != opt.arg => others.push(long),
                    Some(_) => {}
                }
            }
        }
        match first {
            None => Err(GetoptError::UnknownLong(typed.to_string())),
            Some(found) if others.is_empty() => Ok(found),
            Some((_, long)) => {
                let mut candidates = vec![long];
                candidates.extend(others);
                Err(GetoptError::Ambiguous {
                    typed: typed.to_string(),
                    candidates,
                })
            }
        }
    }

    /// A word of short options (`hj1`, `o%i`); how many following words it took.
    fn shorts(
        &self,
        letters: &str,
        next: Option<&str>,
        out: &mut Parsed,
    ) -> Result<usize, GetoptError> {
        for (at, c) in letters.char_indices() {
            let opt = self
                .options
                .iter()
                .find(|o| o.short == Some(c))
                .ok_or(GetoptError::UnknownShort(c))?;
            let rest = &letters[at + c.len_utf8()..];
            match opt.arg {
                HasArg::No => out.options.push(Found {
                    key: opt.key,
                    value: None,
                }),
                HasArg::Optional => {
                    out.options.push(Found {
                        key: opt.key,
                        value: (!rest.is_empty()).then(|| rest.to_string()),
                    });
                    return Ok(0);
                }
                HasArg::Required if !rest.is_empty() => {
                    out.options.push(Found {
                        key: opt.key,
                        value: Some(rest.to_string()),
                    });
                    return Ok(0);
                }
                HasArg::Required => {
                    let value = next.ok_or(GetoptError::ShortNeedsValue(c))?;
                    out.options.push(Found {
                        key: opt.key,
                        value: Some(value.to_string()),
                    });
                    return Ok(1);
                }
            }
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[Opt] = &[
        Opt::new("format", Some('o'), &["format"], HasArg::Required),
        Opt::new("Format", Some('O'), &["Format"], HasArg::Required),
        Opt::new("noheader", Some('h'), &["noheader"], HasArg::No),
        Opt::new("jobs", Some('j'), &["jobs"], HasArg::Optional),
        Opt::new(
            "nodelist",
            Some('w'),
            &["nodelist", "nodes", "node"],
            HasArg::Required,
        ),
        Opt::new("sib", None, &["sib", "sibling"], HasArg::No),
        Opt::new("sort", Some('S'), &["sort"], HasArg::Required),
        Opt::new("start", None, &["start"], HasArg::No),
        Opt::new("steps", Some('s'), &["steps"], HasArg::Optional),
        Opt::new("states", Some('t'), &["states"], HasArg::Required),
        Opt::new("usage", None, &["usage"], HasArg::No),
        Opt::new("user", Some('u'), &["user", "users"], HasArg::Required),
    ];

    fn parse(words: &[&str]) -> Result<Parsed, GetoptError> {
        Parser::new(TABLE).parse(words)
    }

    fn found(key: &'static str, value: Option<&str>) -> Found {
        Found {
            key,
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn values_attached_separate_and_after_an_equals_sign() {
        for words in [
            &["-o%i"][..],
            &["-o", "%i"],
            &["--format=%i"],
            &["--format", "%i"],
            &["--form", "%i"],
        ] {
            assert_eq!(
                parse(words).expect("parse").last("format"),
                Some("%i"),
                "{words:?}"
            );
        }
        // A required value may start with a dash.
        assert_eq!(
            parse(&["-o", "-x"]).expect("parse").last("format"),
            Some("-x")
        );
        let p = parse(&["-hj1", "-ho%i,%j"]).expect("parse");
        assert_eq!(
            p.options,
            [
                found("noheader", None),
                found("jobs", Some("1")),
                found("noheader", None),
                found("format", Some("%i,%j"))
            ]
        );
    }

    #[test]
    fn optional_values_are_taken_only_attached_and_operands_mix_with_options() {
        let p = parse(&["-j", "13", "-o", "%i", "14", "--jobs=15", "--", "-h"]).expect("parse");
        assert_eq!(
            p.options,
            [
                found("jobs", None),
                found("format", Some("%i")),
                found("jobs", Some("15"))
            ]
        );
        assert_eq!(p.operands, ["13", "14", "-h"]);
        assert_eq!(parse(&["-"]).expect("parse").operands, ["-"]);
        let in_order = Parser::in_order(TABLE)
            .parse(&["-h", "bash", "-o", "x"])
            .expect("parse");
        assert_eq!(in_order.options, [found("noheader", None)]);
        assert_eq!(in_order.operands, ["bash", "-o", "x"]);
    }

    #[test]
    fn prefixes_exact_names_and_names_of_one_option() {
        assert!(parse(&["--noh"]).expect("parse").has("noheader"));
        // Exact beats longer names; names of the same option are not ambiguous.
        assert_eq!(parse(&["--user=a"]).expect("parse").last("user"), Some("a"));
        assert_eq!(
            parse(&["--node", "n1"]).expect("parse").last("nodelist"),
            Some("n1")
        );
        assert_eq!(
            parse(&["--nod", "n1"]).expect("parse").last("nodelist"),
            Some("n1")
        );
        // Long names are case-sensitive.
        assert_eq!(
            parse(&["--F", "jobid"]).expect("parse").last("Format"),
            Some("jobid")
        );
        assert_eq!(
            parse(&["--f", "%i"]).expect("parse").last("format"),
            Some("%i")
        );
    }

    #[test]
    fn mistakes_read_as_glibc_prints_them() {
        let line = |words: &[&str]| parse(words).expect_err("a mistake").line("squeue");
        assert_eq!(line(&["--bogus"]), "squeue: unrecognized option '--bogus'");
        assert_eq!(line(&["-Z"]), "squeue: invalid option -- 'Z'");
        assert_eq!(line(&["-o"]), "squeue: option requires an argument -- 'o'");
        assert_eq!(
            line(&["--format"]),
            "squeue: option '--format' requires an argument"
        );
        assert_eq!(
            line(&["--sta"]),
            "squeue: option '--sta' is ambiguous; possibilities: '--start' '--states'"
        );
        assert_eq!(
            line(&["--start=1"]),
            "squeue: option '--start' doesn't allow an argument"
        );
        assert_eq!(
            line(&["--s"]),
            "squeue: option '--s' is ambiguous; possibilities: '--sib' '--sort' '--start' '--steps' '--states'"
        );
        assert_eq!(
            line(&["--u=x"]),
            "squeue: option '--u=x' is ambiguous; possibilities: '--usage' '--user' '--users'"
        );
        assert_eq!(
            line(&["--stat"]),
            "squeue: option '--states' requires an argument"
        );
    }
}
