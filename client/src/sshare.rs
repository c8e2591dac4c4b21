//! `atrium sshare`: the fair-share tree, option for option as Slurm 22.05's sshare:
//! its options read as getopt_long reads them (`-a`, `-A`, `-u`, `-U`, `-l`, `-m`,
//! `-o`, `-p`, `-P`, `-n`/`-h`, `-e`, `-M`), its field list (names matched by
//! their beginning, any case, `%N` widths) printed by Slurm's print engine
//! ([`super::print_fields`]), the tree's indentation and its words when something
//! is wrong. The figures are the portal's (`GET /api/v1/shares`): atrium weighs
//! accounts, each user's jobs getting their account's factor (Slurm's
//! `FairShare=parent`: a user's RawShares reads `parent`), with PriorityFlags
//! FAIR_TREE's layout (FairShare blank on account lines, LevelFS with `-l`). What
//! atrium does not keep prints as Slurm prints it unset: ID, Partition,
//! GrpTRESMins and TRESRunMins empty.

use serde::Deserialize;

use super::getopt::{HasArg, Opt, Parser};
use super::print_fields::{self, Cut, Layout};
use super::{connect, print_lines, CommandExit};

const CMD: &str = "sshare";

/// sshare's options, in the order of its table (which decides ambiguities).
const OPTIONS: &[Opt] = &[
    Opt::new("accounts", Some('A'), &["accounts"], HasArg::Required),
    Opt::new("all", Some('a'), &["all"], HasArg::No),
    Opt::new("helpformat", Some('e'), &["helpformat"], HasArg::No),
    Opt::new("long", Some('l'), &["long"], HasArg::No),
    Opt::new("partition", Some('m'), &["partition"], HasArg::No),
    Opt::new(
        "clusters",
        Some('M'),
        &["cluster", "clusters"],
        HasArg::Required,
    ),
    Opt::new("noheader", Some('n'), &["noheader"], HasArg::No),
    Opt::new("format", Some('o'), &["format"], HasArg::Required),
    Opt::new("parsable", Some('p'), &["parsable"], HasArg::No),
    Opt::new("parsable2", Some('P'), &["parsable2"], HasArg::No),
    Opt::new("users", Some('u'), &["users"], HasArg::Required),
    Opt::new("Users", Some('U'), &["Users"], HasArg::No),
    Opt::new("verbose", Some('v'), &["verbose"], HasArg::No),
    Opt::new("version", Some('V'), &["version"], HasArg::No),
    Opt::new("help", None, &["help"], HasArg::No),
    Opt::new("usage", None, &["usage"], HasArg::No),
    // In its short options, not handled: `getopt error, returned q`.
    Opt::new("q", Some('q'), &[], HasArg::No),
    Opt::new("t", Some('t'), &[], HasArg::Required),
    Opt::new("noheader", Some('h'), &[], HasArg::No),
];

/// sshare's fields, in its order (the order names are matched in): name and width
/// (negative: left-justified).
const FIELDS: &[(&str, i32)] = &[
    ("Account", -20),
    ("Cluster", 10),
    ("EffectvUsage", 13),
    ("FairShare", 10),
    ("GrpTRESMins", 30),
    ("GrpTRESRaw", 30),
    ("ID", 6),
    ("LevelFS", 10),
    ("NormShares", 11),
    ("NormUsage", 11),
    ("Partition", 12),
    ("RawShares", 10),
    ("RawUsage", 11),
    ("TRESRunMins", 30),
    ("User", 10),
];

const DEFAULT: &str = "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare";
const DEFAULT_PARTITION: &str = "A,User,P,RawShares,NormShares,RawUsage,Eff,Fairshare";
const LONG: &str =
    "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,LevelFS,GrpTRESMins,TRESRunMins";
const LONG_PARTITION: &str = "A,User,P,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,LevelFS,GrpTRESMins,TRESRunMins";

/// One line of `GET /shares`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ShareLine {
    pub account: String,
    pub user: Option<String>,
    pub parent: Option<String>,
    pub raw_shares: Option<u32>,
    pub shares_from_parent: bool,
    pub norm_shares: f64,
    pub raw_usage: f64,
    pub norm_usage: f64,
    pub effective_usage: f64,
    pub fairshare: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Answer {
    pub cluster: String,
    pub lines: Vec<ShareLine>,
}

/// What the command line asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub header: bool,
    pub long: bool,
    pub partition: bool,
    pub users_only: bool,
    pub layout: Option<Layout>,
    /// Every `-o`, each followed by a comma, as sshare collects them.
    pub format: Option<String>,
    pub all_users: bool,
    pub users: Vec<String>,
    /// Lower-cased.
    pub accounts: Vec<String>,
    /// `-M`: the cluster's name is printed first.
    pub cluster: bool,
    /// What to print instead (`--help`, `--usage`, `-e`, `--version`).
    pub early: Option<Vec<String>>,
}

/// Read sshare's command line, option by option as sshare acts on them.
pub fn read(args: &[String]) -> Result<Request, CommandExit> {
    let parsed = Parser::new(OPTIONS)
        .parse(args)
        .map_err(|e| super::usage_error(CMD, &e))?;
    let mut r = Request {
        header: true,
        ..Request::default()
    };
    let mut users: Option<Vec<String>> = None;
    for o in &parsed.options {
        let value = o.value.as_deref().unwrap_or("");
        match o.key {
            "all" => r.all_users = true,
            "accounts" => print_fields::addto_char_list(&mut r.accounts, value),
            "helpformat" => {
                let names: Vec<&str> = FIELDS.iter().map(|(n, _)| *n).collect();
                r.early = Some(print_fields::help_lines(&names, 17));
                return Ok(r);
            }
            "noheader" => r.header = false,
            "long" => r.long = true,
            "clusters" => r.cluster = true,
            "partition" => r.partition = true,
            "format" => {
                let f = r.format.get_or_insert_with(String::new);
                f.push_str(value);
                f.push(',');
            }
            "parsable" => r.layout = Some(Layout::Parsable),
            "parsable2" => r.layout = Some(Layout::Parsable2),
            "users" if value == "-1" => r.all_users = true,
            "users" => {
                r.all_users = false;
                let list = users.get_or_insert_with(Vec::new);
                for name in value.split(',').filter(|s| !s.is_empty()) {
                    if !list.iter().any(|u| u.eq_ignore_ascii_case(name)) {
                        list.push(name.to_string());
                    }
                }
            }
            "Users" => r.users_only = true,
            "version" => {
                r.early = Some(vec![super::VERSION_LINE.to_string()]);
                return Ok(r);
            }
            "help" | "usage" => {
                r.early = Some(HELP.iter().map(|l| l.to_string()).collect());
                return Ok(r);
            }
            other => {
                return Err(CommandExit::new(
                    vec![format!("getopt error, returned {other}")],
                    1,
                ))
            }
        }
    }
    if !r.all_users {
        r.users = users.unwrap_or_default();
    }
    Ok(r)
}

/// The columns of `r`'s format: sshare's default, or the `-o` list read as
/// Slurm reads it (lower case, a repeated name moved to the end, `%N` widths, a
/// width set for a field applying to each of its columns).
pub fn columns(r: &Request) -> Result<Vec<(usize, i32)>, CommandExit> {
    let spec = match (&r.format, r.long, r.partition) {
        (Some(f), _, _) => f.clone(),
        (None, true, true) => LONG_PARTITION.into(),
        (None, true, false) => LONG.into(),
        (None, false, true) => DEFAULT_PARTITION.into(),
        (None, false, false) => DEFAULT.into(),
    };
    let mut items = Vec::new();
    print_fields::addto_char_list(&mut items, &spec);
    let names: Vec<&str> = FIELDS.iter().map(|(n, _)| *n).collect();
    let mut widths: Vec<i32> = FIELDS.iter().map(|(_, w)| *w).collect();
    let mut chosen = Vec::new();
    for item in &items {
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (n, print_fields::atoi(w)),
            None => (item.as_str(), 0),
        };
        let Some(i) = print_fields::find_prefix(&names, name) else {
            return Err(CommandExit::new(
                vec![format!("{CMD}: error: Invalid field requested: \"{name}\"")],
                1,
            ));
        };
        if width != 0 {
            widths[i] = width;
        }
        chosen.push(i);
    }
    Ok(chosen.into_iter().map(|i| (i, widths[i])).collect())
}

/// The query for the portal.
pub fn query(r: &Request) -> Vec<(&'static str, String)> {
    let mut q = Vec::new();
    if !r.accounts.is_empty() {
        q.push(("accounts", r.accounts.join(",")));
    }
    if r.all_users {
        q.push(("all_users", "true".into()));
    } else if !r.users.is_empty() {
        q.push(("users", r.users.join(",")));
    }
    q
}

/// A name already placed in the tree (Slurm's `slurmdb_print_tree_t`).
struct Placed {
    name: String,
    spaces: String,
    print_name: String,
    user: bool,
}

/// The Account column of a line as Slurm's `slurmdb_tree_name_get` gives it: one
/// blank more than its parent when the parent was printed before, a user's line
/// showing its account.
fn tree_name(tree: &mut Vec<Placed>, name: &str, parent: Option<&str>) -> String {
    let mut parent_at = None;
    let mut found = None;
    for (i, p) in tree.iter().enumerate() {
        if p.user {
            continue;
        }
        if p.name == name {
            found = Some(i);
            break;
        } else if parent == Some(p.name.as_str()) {
            parent_at = Some(i);
        }
    }
    if let (Some(_), Some(i)) = (parent, found) {
        return tree[i].print_name.clone();
    }
    let spaces = parent_at.map_or(String::new(), |i| format!(" {}", tree[i].spaces));
    let user = name.starts_with('|');
    let print_name = if user {
        format!("{spaces}{}", parent.unwrap_or(""))
    } else {
        format!("{spaces}{name}")
    };
    tree.push(Placed {
        name: name.to_string(),
        spaces,
        print_name: print_name.clone(),
        user,
    });
    print_name
}

/// The lines sshare prints for `answer`.
pub fn output(r: &Request, columns: &[(usize, i32)], answer: &Answer) -> Vec<String> {
    let layout = r.layout.unwrap_or(Layout::Fixed);
    let mut out = Vec::new();
    if r.cluster {
        out.push(format!("CLUSTER: {}", answer.cluster));
    }
    if r.header {
        let names: Vec<(&str, i32)> = columns.iter().map(|(i, w)| (FIELDS[*i].0, *w)).collect();
        out.extend(print_fields::header(&names, layout, "|"));
    }
    let mut tree = Vec::new();
    for line in &answer.lines {
        if r.users_only && line.user.is_none() {
            continue;
        }
        let cells = columns
            .iter()
            .map(|&(i, width)| {
                let text = |t: &str| print_fields::value(t, width, Cut::Plus, layout);
                let number = |t: &str| print_fields::value(t, width, Cut::Never, layout);
                let double = |v: f64| print_fields::double(v, width, layout);
                match FIELDS[i].0 {
                    "Account" => {
                        let name = match &line.user {
                            Some(u) => format!("|{u}"),
                            None => line.account.clone(),
                        };
                        let parent = match &line.user {
                            Some(_) => Some(line.account.as_str()),
                            None => line.parent.as_deref(),
                        };
                        text(&tree_name(&mut tree, &name, parent))
                    }
                    "Cluster" => text(&answer.cluster),
                    "EffectvUsage" => double(line.effective_usage),
                    "FairShare" => match (&line.user, line.fairshare) {
                        (Some(_), Some(f)) => double(f),
                        _ => text(""),
                    },
                    // Slurm's billing TRES: what atrium's usage counts, in minutes.
                    "GrpTRESRaw" => text(&format!("billing={}", (line.raw_usage / 60.0) as u64)),
                    "LevelFS" if line.shares_from_parent => text(""),
                    "LevelFS" => double(line.norm_shares / line.effective_usage),
                    "NormShares" => double(line.norm_shares),
                    "NormUsage" => double(line.norm_usage),
                    "RawShares" if line.shares_from_parent => text("parent"),
                    "RawShares" => {
                        number(&line.raw_shares.map(|s| s.to_string()).unwrap_or_default())
                    }
                    "RawUsage" => number(&(line.raw_usage.max(0.0) as u64).to_string()),
                    "User" => text(line.user.as_deref().unwrap_or("")),
                    // ID, Partition, GrpTRESMins, TRESRunMins: not kept by atrium.
                    _ => text(""),
                }
            })
            .collect();
        out.push(print_fields::join(cells, layout, "|"));
    }
    out
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let r = read(&args)?;
    if let Some(early) = &r.early {
        print_lines(early.iter())?;
        return Ok(());
    }
    let portal = connect(CMD)?;
    let answer: Answer = portal.get_query("/shares", &query(&r)).await.map_err(|e| {
        CommandExit::new(
            vec![format!(
                "Couldn't get shares from controller: {}",
                e.message
            )],
            255,
        )
    })?;
    let columns = columns(&r)?;
    print_lines(output(&r, &columns, &answer).iter())?;
    Ok(())
}

const HELP: &[&str] = &[
    "Usage:  sshare [OPTION]                                                    ",
    "  Valid OPTIONs are:                                                       ",
    "    -a or --all            list all users                                  ",
    "    -A or --accounts=      display specific accounts (comma separated list)",
    "    -e or --helpformat     Print a list of fields that can be specified    ",
    "                           with the '--format' option                      ",
    "    -l or --long           include normalized usage in output              ",
    "    -m or --partition      print the partition part of the association     ",
    "    -M or --cluster=names  clusters to issue commands to.                  ",
    "                           NOTE: SlurmDBD must be up.                      ",
    "    -n or --noheader       omit header from output                         ",
    "    -o or --format=        Comma separated list of fields (use             ",
    "                           \"--helpformat\" for a list of available fields).",
    "    -p or --parsable       '|' delimited output with a trailing '|'        ",
    "    -P or --parsable2      '|' delimited output without a trailing '|'     ",
    "    -u or --users=         display specific users (comma separated list)   ",
    "    -U or --Users          display only user information                   ",
    "    -v or --verbose        display more information                        ",
    "    -V or --version        display tool version number                     ",
    "          --help           display this usage description                  ",
    "          --usage          display this usage description                  ",
    "                                                                           ",
    "",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    fn line(account: &str, user: Option<&str>, usage: f64, eff: f64, fs: Option<f64>) -> ShareLine {
        ShareLine {
            account: account.into(),
            user: user.map(String::from),
            parent: match (account, user) {
                ("root", None) => None,
                (_, None) => Some("root".into()),
                (a, Some(_)) => Some(a.into()),
            },
            raw_shares: match (account, user) {
                ("root", None) => None,
                (_, None) => Some(1),
                _ => None,
            },
            shares_from_parent: user.is_some(),
            norm_shares: if account == "root" && user.is_none() {
                0.0
            } else {
                0.5
            },
            raw_usage: usage,
            norm_usage: usage / 173.0,
            effective_usage: eff,
            fairshare: fs,
        }
    }

    fn answer() -> Answer {
        Answer {
            cluster: "vm".into(),
            lines: vec![
                line("root", None, 173.0, 1.0, None),
                line("chem", None, 0.0, 0.0, Some(1.0)),
                line("chem", Some("bob"), 0.0, 0.0, Some(1.0)),
                line("phys", None, 173.0, 1.0, Some(0.25)),
                line("phys", Some("ann"), 173.9, 1.0, Some(0.25)),
            ],
        }
    }

    fn lines(w: &[&str]) -> Vec<String> {
        let r = read(&words(w)).expect("read");
        let columns = columns(&r).expect("columns");
        output(&r, &columns, &answer())
    }

    #[test]
    fn the_tree_is_indented_and_fairshare_is_blank_on_accounts() {
        assert_eq!(
            lines(&["-a"]),
            [
                "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare ",
                "-------------------- ---------- ---------- ----------- ----------- ------------- ---------- ",
                "root                                          0.000000         173      1.000000            ",
                " chem                                    1    0.500000           0      0.000000            ",
                "  chem                      bob     parent    0.500000           0      0.000000   1.000000 ",
                " phys                                    1    0.500000         173      1.000000            ",
                "  phys                      ann     parent    0.500000         173      1.000000   0.250000 ",
            ]
        );
        assert_eq!(
            lines(&["-U", "-P"]),
            [
                "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare",
                "chem|bob|parent|0.500000|0|0.000000|1.000000",
                "phys|ann|parent|0.500000|173|1.000000|0.250000",
            ]
        );
        assert_eq!(lines(&["-p", "-n", "-o", "a,u"])[0], "root||");
    }

    #[test]
    fn long_adds_normusage_and_levelfs() {
        let long = lines(&["-l", "-o", "acc%-8,levelfs,normu,grptresraw%12"]);
        assert_eq!(long[0], "Account     LevelFS   NormUsage   GrpTRESRaw ");
        assert_eq!(long[3], " chem           inf    0.000000    billing=0 ");
        assert_eq!(long[4], "  chem                 0.000000    billing=0 ");
        let r = read(&words(&["-l", "-m"])).expect("read");
        let names: Vec<&str> = columns(&r)
            .expect("columns")
            .iter()
            .map(|(i, _)| FIELDS[*i].0)
            .collect();
        assert_eq!(
            names,
            [
                "Account",
                "User",
                "Partition",
                "RawShares",
                "NormShares",
                "RawUsage",
                "NormUsage",
                "EffectvUsage",
                "FairShare",
                "LevelFS",
                "GrpTRESMins",
                "TRESRunMins"
            ]
        );
    }

    #[test]
    fn field_lists_widths_and_repeats() {
        // A repeated name moves to the end; a width applies to every column of it.
        let r = read(&words(&["-o", "user,account", "-o", "USER"])).expect("read");
        assert_eq!(columns(&r).expect("columns"), [(0, -20), (14, 10)]);
        let r = read(&words(&["-o", "user%4,account", "-o", "USER"])).expect("read");
        assert_eq!(columns(&r).expect("columns"), [(14, 4), (0, -20), (14, 4)]);
        let r = read(&words(&["-o", "fairshare%5", "-n", "-U"])).expect("read");
        let cols = columns(&r).expect("columns");
        assert_eq!(output(&r, &cols, &answer())[0], "1.000000e+00 ");
        let r = read(&words(&["-o", "bogus"])).expect("read");
        assert_eq!(
            columns(&r).expect_err("bogus").stderr,
            ["sshare: error: Invalid field requested: \"bogus\""]
        );
    }

    #[test]
    fn users_accounts_and_the_query() {
        let q = |w: &[&str]| query(&read(&words(w)).expect("read"));
        assert!(q(&[]).is_empty(), "the invoking user, as the portal knows");
        assert_eq!(q(&["-a"]), [("all_users", "true".to_string())]);
        assert_eq!(q(&["-u", "-1"]), [("all_users", "true".to_string())]);
        assert_eq!(q(&["-a", "-u", "ann"]), [("users", "ann".to_string())]);
        assert_eq!(
            q(&["-A", "Phys,chem,PHYS", "-u", "ann,bob,ANN"]),
            [
                ("accounts", "chem,phys".to_string()),
                ("users", "ann,bob".to_string())
            ]
        );
        let r = read(&words(&["-M", "vm", "-n", "-o", "user"])).expect("read");
        let cols = columns(&r).expect("columns");
        assert_eq!(output(&r, &cols, &answer())[0], "CLUSTER: vm");
    }

    #[test]
    fn mistakes_and_early_answers_are_sshares_own() {
        let fail = |w: &[&str]| read(&words(w)).expect_err("a mistake");
        assert_eq!(
            fail(&["--bogus"]).stderr,
            [
                "sshare: unrecognized option '--bogus'",
                "Try \"sshare --help\" for more information"
            ]
        );
        assert_eq!(fail(&["-Z"]).stderr[0], "sshare: invalid option -- 'Z'");
        assert_eq!(
            fail(&["-o"]).stderr[0],
            "sshare: option requires an argument -- 'o'"
        );
        assert_eq!(
            fail(&["--u"]).stderr[0],
            "sshare: option '--u' is ambiguous; possibilities: '--users' '--usage'"
        );
        assert_eq!(fail(&["-q"]).stderr, ["getopt error, returned q"]);
        assert_eq!(fail(&["-t", "x"]).stderr, ["getopt error, returned t"]);
        assert_eq!(fail(&["-q"]).status, 1);
        let early = |w: &[&str]| read(&words(w)).expect("read").early.expect("early");
        assert_eq!(
            early(&["-e", "-q"])[0],
            "Account           Cluster           EffectvUsage      FairShare        "
        );
        assert_eq!(early(&["-e"]).len(), 4);
        assert_eq!(early(&["--usage"]), early(&["--help"]));
        assert_eq!(early(&["--help"]).len(), HELP.len());
        assert_eq!(early(&["-V"]), [crate::VERSION_LINE]);
    }
}
