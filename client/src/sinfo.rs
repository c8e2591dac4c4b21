//! `atrium sinfo`: partitions and their nodes, option for option as Slurm 22.05's
//! sinfo: its options read as getopt_long reads them, its output formats (`-o` with
//! every `%` letter, `-O` names, `-l`, `-N`, `-s`, `-R`, `SINFO_FORMAT`), the `*` on
//! the default partition, its filters (`-p`, `-t`, `-n`, `-d`, `-r`) and its words
//! when something is wrong. Lines group the nodes whose shown values agree, as sinfo's
//! do (a partition's nodes by state, by default).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::api::PartitionInfo;
use super::columns::{self, Column, Format};
use super::getopt::{HasArg, Opt, Parser};
use super::times::Clock;
use super::times::{parse_limit, time_limit};
use super::{connect, failed, print_lines, CommandExit};

const CMD: &str = "sinfo";

const OPTIONS: &[Opt] = &[
    Opt::new("all", Some('a'), &["all"], HasArg::No),
    Opt::new("dead", Some('d'), &["dead"], HasArg::No),
    Opt::new("exact", Some('e'), &["exact"], HasArg::No),
    Opt::new("federation", None, &["federation"], HasArg::No),
    Opt::new("help", None, &["help"], HasArg::No),
    Opt::new("hide", None, &["hide"], HasArg::No),
    Opt::new("iterate", Some('i'), &["iterate"], HasArg::Required),
    Opt::new("local", None, &["local"], HasArg::No),
    Opt::new("long", Some('l'), &["long"], HasArg::No),
    Opt::new(
        "clusters",
        Some('M'),
        &["cluster", "clusters"],
        HasArg::Required,
    ),
    Opt::new("nodes", Some('n'), &["nodes"], HasArg::Required),
    Opt::new("noconvert", None, &["noconvert"], HasArg::No),
    Opt::new("noheader", Some('h'), &["noheader"], HasArg::No),
    Opt::new("Node", Some('N'), &["Node"], HasArg::No),
    Opt::new("format", Some('o'), &["format"], HasArg::Required),
    Opt::new("Format", Some('O'), &["Format"], HasArg::Required),
    Opt::new("partition", Some('p'), &["partition"], HasArg::Required),
    Opt::new("responding", Some('r'), &["responding"], HasArg::No),
    Opt::new("list-reasons", Some('R'), &["list-reasons"], HasArg::No),
    Opt::new("summarize", Some('s'), &["summarize"], HasArg::No),
    Opt::new("sort", Some('S'), &["sort"], HasArg::Required),
    Opt::new("states", Some('t'), &["states"], HasArg::Required),
    Opt::new("reservation", Some('T'), &["reservation"], HasArg::No),
    Opt::new("usage", None, &["usage"], HasArg::No),
    Opt::new("verbose", Some('v'), &["verbose"], HasArg::No),
    Opt::new("version", Some('V'), &["version"], HasArg::No),
    Opt::new("json", None, &["json"], HasArg::No),
    Opt::new("yaml", None, &["yaml"], HasArg::No),
];

/// The `%` letters and their headers.
const LETTERS: &[(char, &str)] = &[
    ('a', "AVAIL"),
    ('A', "NODES(A/I)"),
    ('b', "ACTIVE_FEATURES"),
    ('B', "MAX_CPUS_PER_NODE"),
    ('c', "CPUS"),
    ('C', "CPUS(A/I/O/T)"),
    ('d', "TMP_DISK"),
    ('D', "NODES"),
    ('e', "FREE_MEM"),
    ('E', "REASON"),
    ('f', "AVAIL_FEATURES"),
    ('F', "NODES(A/I/O/T)"),
    ('g', "GROUPS"),
    ('G', "GRES"),
    ('h', "OVERSUBSCRIBE"),
    ('H', "TIMESTAMP"),
    ('I', "PRIO_JOB_FACTOR"),
    ('l', "TIMELIMIT"),
    ('L', "DEFAULTTIME"),
    ('m', "MEMORY"),
    ('M', "PREEMPT_MODE"),
    ('n', "HOSTNAMES"),
    ('N', "NODELIST"),
    ('o', "NODE_ADDR"),
    ('O', "CPU_LOAD"),
    ('p', "PRIO_TIER"),
    ('P', "PARTITION"),
    ('r', "ROOT"),
    ('R', "PARTITION"),
    ('s', "JOB_SIZE"),
    ('S', "ALLOCNODES"),
    ('t', "STATE"),
    ('T', "STATE"),
    ('u', "USER"),
    ('U', "USER"),
    ('v', "VERSION"),
    ('V', "CLUSTER"),
    ('w', "WEIGHT"),
    ('X', "SOCKETS"),
    ('Y', "CORES"),
    ('Z', "THREADS"),
    ('z', "S:C:T"),
    // `-O` only.
    ('0', "ALLOCMEM"),
    ('1', "GRES_USED"),
    ('2', "STATECOMPLETE"),
    ('3', "PORT"),
];

const NAMES: &[(&str, char)] = &[
    ("available", 'a'),
    ("nodeai", 'A'),
    ("features_act", 'b'),
    ("maxcpuspernode", 'B'),
    ("cpus", 'c'),
    ("cpusstate", 'C'),
    ("disk", 'd'),
    ("nodes", 'D'),
    ("freemem", 'e'),
    ("reason", 'E'),
    ("features", 'f'),
    ("nodeaiot", 'F'),
    ("groups", 'g'),
    ("gres", 'G'),
    ("oversubscribe", 'h'),
    ("share", 'h'),
    ("timestamp", 'H'),
    ("priorityjobfactor", 'I'),
    ("time", 'l'),
    ("defaulttime", 'L'),
    ("memory", 'm'),
    ("preemptmode", 'M'),
    ("nodehost", 'n'),
    ("nodelist", 'N'),
    ("nodeaddr", 'o'),
    ("cpusload", 'O'),
    ("prioritytier", 'p'),
    ("partition", 'P'),
    ("root", 'r'),
    ("partitionname", 'R'),
    ("size", 's'),
    ("allocnodes", 'S'),
    ("statecompact", 't'),
    ("statelong", 'T'),
    ("user", 'u'),
    ("userlong", 'U'),
    ("version", 'v'),
    ("cluster", 'V'),
    ("weight", 'w'),
    ("sockets", 'X'),
    ("cores", 'Y'),
    ("threads", 'Z'),
    ("socketcorethread", 'z'),
    ("allocmem", '0'),
    ("gresused", '1'),
    ("statecomplete", '2'),
    ("port", '3'),
];

const DEFAULT: &str = "%#P %.5a %.10l %.6D %.6t %N";
const SUMMARIZE: &str = "%#P %.5a %.10l %.16F %N";
const LONG: &str = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N";
const NODE: &str = "%#N %.6D %#P %6t";
const NODE_LONG: &str = "%#N %.6D %#P %.11T %.4c %.8z %.6m %.8d %.6w %.8f %20E";
const REASONS: &str = "%20E %9u %19H %N";
const REASONS_LONG: &str = "%20E %12U %19H %6t %N";

/// A node as `GET /nodes` gives it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct NodeInfo {
    pub name: String,
    pub state: NodeStateInfo,
    pub partitions: Vec<String>,
    pub cpus_total: u32,
    pub cpus_free: u32,
    pub memory_mb_total: u64,
    pub memory_mb_free: u64,
    pub features: Vec<String>,
    pub slices: Vec<SliceInfo>,
    /// Its machine's facts, where the portal runs on it.
    #[serde(skip)]
    pub host: Option<HostInfo>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct NodeStateInfo {
    pub state: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SliceInfo {
    pub r#type: String,
    pub total: u32,
    pub used: u32,
}

/// `GET /nodes`: the nodes and the partitions.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Cluster {
    pub nodes: Vec<NodeInfo>,
    pub partitions: Vec<PartitionInfo>,
    /// The machine the portal runs on, when it is the node.
    pub host: Option<HostInfo>,
}

/// What the portal reads of its own machine, the node of its internal scheduler.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct HostInfo {
    pub node: String,
    pub os: String,
    pub boot_time: Option<i64>,
    pub started: Option<i64>,
    pub cpu_load: Option<f64>,
    pub free_memory_mb: Option<u64>,
}

impl NodeInfo {
    /// `FreeMem`/`FREE_MEM`: what the machine has available, where known.
    pub fn free_memory(&self) -> String {
        self.host
            .as_ref()
            .and_then(|h| h.free_memory_mb)
            .map_or_else(|| "N/A".into(), |m| m.to_string())
    }

    /// `CPULoad`/`CPU_LOAD`: the one-minute load average, where known.
    pub fn cpu_load(&self) -> String {
        self.host
            .as_ref()
            .and_then(|h| h.cpu_load)
            .map_or_else(|| "N/A".into(), |l| format!("{l:.2}"))
    }
}

impl NodeInfo {
    fn allocated(&self) -> bool {
        self.cpus_free < self.cpus_total || self.slices.iter().any(|s| s.used > 0)
    }

    fn idle(&self) -> bool {
        !self.allocated() && self.state.state == "IDLE"
    }

    /// `idle`, `mix`, `alloc`, `drain`/`drng`, `down`.
    fn compact(&self) -> &'static str {
        match self.state.state.as_str() {
            "IDLE" => "idle",
            "MIXED" => "mix",
            "ALLOCATED" => "alloc",
            "DRAIN" if self.allocated() => "drng",
            "DRAIN" => "drain",
            "DOWN" => "down",
            _ => "unk",
        }
    }

    fn long(&self) -> &'static str {
        match self.state.state.as_str() {
            "IDLE" => "idle",
            "MIXED" => "mixed",
            "ALLOCATED" => "allocated",
            "DRAIN" if self.allocated() => "draining",
            "DRAIN" => "drained",
            "DOWN" => "down",
            _ => "unknown",
        }
    }

    fn reason(&self) -> String {
        self.state
            .reason
            .clone()
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "none".into())
    }

    fn gres(&self) -> String {
        let items: Vec<String> = self
            .slices
            .iter()
            .map(|s| format!("{}:{}", gres_name(&s.r#type), s.total))
            .collect();
        if items.is_empty() {
            "(null)".into()
        } else {
            items.join(",")
        }
    }

    fn gres_used(&self) -> String {
        let items: Vec<String> = self
            .slices
            .iter()
            // Which GPUs are in use is not known here: Slurm's `IDX:N/A` when none is.
            .map(|s| match s.used {
                0 => format!("{}:0(IDX:N/A)", gres_name(&s.r#type)),
                used => format!("{}:{used}", gres_name(&s.r#type)),
            })
            .collect();
        if items.is_empty() {
            "(null)".into()
        } else {
            items.join(",")
        }
    }
}

/// `gpu:a100` for a GPU type, `shard` for shards.
fn gres_name(slice_type: &str) -> String {
    if slice_type == "shard" || slice_type.starts_with("gpu") {
        slice_type.to_string()
    } else {
        format!("gpu:{slice_type}")
    }
}

/// What the command line and environment ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub format: Format,
    pub header: bool,
    pub long: bool,
    pub per_node: bool,
    pub summarize: bool,
    pub reasons: bool,
    pub partitions: Vec<String>,
    pub states: Vec<String>,
    pub nodes: Vec<String>,
    pub dead: bool,
    pub responding: bool,
    pub early: Option<Vec<String>>,
}

fn list(values: Vec<&str>) -> Vec<String> {
    super::split_lists(values)
}

/// Node states `-t` takes (each may be a prefix), as sinfo lists them.
const NODE_STATES: &[&str] = &[
    "unknown",
    "down",
    "idle",
    "allocated",
    "?",
    "mixed",
    "future",
    "drain",
    "drained",
    "draining",
    "no_respond",
    "reserved",
    "perfctrs",
    "cloud",
    "completing",
    "powering_down",
    "powered_down",
    "power_down",
    "powering_up",
    "fail",
    "maint",
    "reboot",
    "reboot^",
    "unknown",
];

pub fn read(args: &[String], var: &dyn Fn(&str) -> Option<String>) -> Result<Request, CommandExit> {
    let parsed = Parser::new(OPTIONS)
        .parse(args)
        .map_err(|e| super::usage_error(CMD, &e))?;
    let mut r = Request {
        header: !parsed.has("noheader"),
        long: parsed.has("long"),
        per_node: parsed.has("Node"),
        summarize: parsed.has("summarize"),
        reasons: parsed.has("list-reasons"),
        dead: parsed.has("dead"),
        responding: parsed.has("responding"),
        ..Request::default()
    };
    if parsed.has("help") || parsed.has("usage") {
        r.early = Some(vec![USAGE.to_string()]);
        return Ok(r);
    }
    if parsed.has("version") {
        r.early = Some(vec![super::VERSION_LINE.to_string()]);
        return Ok(r);
    }
    let fail = |m: &str| CommandExit::new(vec![format!("{CMD}: error: {m}")], 1);
    if parsed.has("all") && parsed.has("partition") {
        return Err(fail(
            "Conflicting options, -a and -p, specified. Please choose one or the other.",
        ));
    }
    if r.long && (parsed.has("format") || parsed.has("Format")) {
        return Err(CommandExit::new(
            vec![format!("{CMD}: fatal: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.")],
            1,
        ));
    }
    if let Some(n) = parsed.last("iterate") {
        if n.trim().parse::<i64>().map_or(true, |n| n <= 0) {
            return Err(fail(&format!("Error: invalid entry for --iterate={n}")));
        }
    }
    r.partitions = list(parsed.all("partition"));
    if r.partitions.is_empty() {
        if let Some(p) = var("SINFO_PARTITION") {
            r.partitions = list(vec![p.as_str()]);
        }
    }
    r.nodes = list(parsed.all("nodes"));
    for state in list(parsed.all("states")) {
        let lower = state.to_ascii_lowercase();
        let known = lower == "all"
            || NODE_STATES.iter().any(|s| s.starts_with(&lower))
            || ["mix", "alloc", "drng", "resv", "plnd", "npc"].contains(&lower.as_str());
        if !known {
            return Err(CommandExit::new(
                vec![
                    format!("{CMD}: error: Bad state string: \"{state}\""),
                    format!("{CMD}: error: valid states: {}", NODE_STATES.join(",")),
                ],
                1,
            ));
        }
        r.states.push(lower);
    }
    if r.reasons && r.states.is_empty() {
        r.states = vec!["down".into(), "fail".into(), "drain".into()];
    }
    let known = |c: char| c.is_ascii_alphabetic() && LETTERS.iter().any(|(l, _)| *l == c);
    let letters: String = LETTERS
        .iter()
        .map(|(l, _)| *l)
        .filter(|c| c.is_ascii_alphabetic())
        .collect();
    // `%#P`: sinfo's own width for partitions and node lists (computed from them).
    let percent =
        |spec: &str| columns::parse_percent(&spec.replace("%#", "%"), &known, &letters, "node");
    let named = |n: &str| NAMES.iter().find(|(name, _)| *name == n).map(|(_, l)| *l);
    // Whichever came last wins; once -O was seen the string is read as -O's.
    let last_format = parsed
        .options
        .iter()
        .rev()
        .find(|o| o.key == "format" || o.key == "Format")
        .and_then(|o| o.value.clone());
    let long_seen = parsed.has("Format");
    r.format = match last_format {
        Some(spec) if long_seen => columns::parse_long(&spec, &named, "job"),
        Some(spec) => percent(&spec),
        None => {
            let builtin = match (r.reasons, r.summarize, r.per_node, r.long) {
                (true, _, _, true) => REASONS_LONG,
                (true, _, _, false) => REASONS,
                (false, true, _, _) => SUMMARIZE,
                (false, false, true, true) => NODE_LONG,
                (false, false, true, false) => NODE,
                (false, false, false, true) => LONG,
                (false, false, false, false) => {
                    if let Some(f) = var("SINFO_FORMAT") {
                        return Ok(Request {
                            format: percent(&f),
                            ..r
                        });
                    }
                    DEFAULT
                }
            };
            let mut f = percent(builtin);
            // The built-in formats size the partition and node list columns to fit.
            for piece in &mut f.pieces {
                if let columns::Piece::Column(c) = piece {
                    if builtin.contains(&format!("%#{}", c.letter)) {
                        c.width = usize::MAX;
                    }
                }
            }
            f
        }
    };
    Ok(r)
}

/// One line's cells by letter, and the nodes it stands for.
struct Line<'a> {
    partition: Option<&'a PartitionInfo>,
    nodes: Vec<&'a NodeInfo>,
}

fn value(line: &Line<'_>, letter: char) -> String {
    let first = line.nodes.first().copied();
    let count = |f: &dyn Fn(&NodeInfo) -> bool| line.nodes.iter().filter(|n| f(n)).count();
    let cpus = |f: &dyn Fn(&NodeInfo) -> u64| line.nodes.iter().map(|n| f(n)).sum::<u64>();
    let node = |f: &dyn Fn(&NodeInfo) -> String| first.map_or_else(|| "n/a".to_string(), f);
    match letter {
        'a' => "up".into(),
        'A' => format!("{}/{}", count(&|n| n.allocated()), count(&|n| n.idle())),
        'b' | 'f' => node(&|n| {
            if n.features.is_empty() {
                "(null)".into()
            } else {
                n.features.join(",")
            }
        }),
        'B' => "UNLIMITED".into(),
        'c' => node(&|n| n.cpus_total.to_string()),
        'C' => {
            let total = cpus(&|n| u64::from(n.cpus_total));
            let other = cpus(&|n| {
                if matches!(n.state.state.as_str(), "DOWN" | "DRAIN") {
                    u64::from(n.cpus_free)
                } else {
                    0
                }
            });
            let alloc = cpus(&|n| u64::from(n.cpus_total - n.cpus_free));
            format!("{alloc}/{}/{other}/{total}", total - alloc - other)
        }
        'd' => "0".into(),
        'D' => line.nodes.len().to_string(),
        'e' => node(&NodeInfo::free_memory),
        'E' => node(&NodeInfo::reason),
        'F' => {
            let alloc = count(&|n| n.allocated());
            let idle = count(&|n| n.idle());
            let total = line.nodes.len();
            format!("{alloc}/{idle}/{}/{total}", total - alloc - idle)
        }
        'g' => "all".into(),
        'G' => node(&NodeInfo::gres),
        'h' => "NO".into(),
        'H' | 'u' | 'U' => "Unknown".into(),
        'I' | 'p' | 'w' => "1".into(),
        'l' => line.partition.map_or_else(
            || "n/a".into(),
            |p| time_limit(parse_limit(&p.max_time).unwrap_or(None)),
        ),
        'L' => "n/a".into(),
        'm' => node(&|n| n.memory_mb_total.to_string()),
        'M' => "OFF".into(),
        'n' | 'N' | 'o' => {
            let names: Vec<&str> = line.nodes.iter().map(|n| n.name.as_str()).collect();
            scheduler_hostlist(&names)
        }
        'O' => node(&NodeInfo::cpu_load),
        'P' => line.partition.map_or_else(String::new, |p| {
            if p.default {
                format!("{}*", p.name)
            } else {
                p.name.clone()
            }
        }),
        'r' => "no".into(),
        'R' => line.partition.map_or_else(String::new, |p| p.name.clone()),
        's' => "1-infinite".into(),
        'S' => "all".into(),
        't' => node(&|n| n.compact().to_string()),
        'T' | '2' => node(&|n| n.long().to_string()),
        'v' => env!("CARGO_PKG_VERSION").into(),
        'V' => "N/A".into(),
        // A node described by its CPUs alone has, as in Slurm, a socket per CPU.
        'X' => node(&|n| n.cpus_total.to_string()),
        'Y' | 'Z' => "1".into(),
        'z' => node(&|n| format!("{}:1:1", n.cpus_total)),
        '0' => node(&|n| (n.memory_mb_total - n.memory_mb_free).to_string()),
        '1' => node(&NodeInfo::gres_used),
        // No node daemon listens for the portal's own node.
        '3' => "N/A".into(),
        _ => String::new(),
    }
}

fn scheduler_hostlist(names: &[&str]) -> String {
    scheduler::compress_hostlist(names)
}

/// Whether a node is in one of the states `-t` names (prefixes, as sinfo reads them).
fn in_states(node: &NodeInfo, states: &[String]) -> bool {
    states.is_empty()
        || states.iter().any(|s| {
            s == "all"
                || node.long().starts_with(s.as_str())
                || node.compact().starts_with(s.as_str())
                || (s == "drain" && node.state.state == "DRAIN")
                || (s == "alloc" && node.allocated())
        })
}

/// The lines: per partition (unless the format shows none), the nodes grouped by
/// the values the format shows; with `-N`, a line per node and partition.
fn lines<'a>(r: &Request, cluster: &'a Cluster) -> Vec<Line<'a>> {
    let shows_partition = r.format.pieces.iter().any(|p| {
        matches!(p, columns::Piece::Column(c) if matches!(c.letter, 'P' | 'R' | 'l' | 'a' | 's' | 'g' | 'h' | 'r'))
    });
    let wanted_node = |n: &NodeInfo| {
        in_states(n, &r.states)
            && (!r.dead || n.state.state == "DOWN")
            && (!r.responding || n.state.state != "DOWN")
            && (r.nodes.is_empty()
                || r.nodes.iter().any(|w| {
                    super::scontrol::expand_hostlist(w)
                        .unwrap_or_default()
                        .contains(&n.name)
                }))
    };
    let partitions: Vec<Option<&PartitionInfo>> = if shows_partition || r.per_node {
        cluster
            .partitions
            .iter()
            .filter(|p| r.partitions.is_empty() || r.partitions.contains(&p.name))
            .map(Some)
            .collect()
    } else {
        vec![None]
    };
    let grouped: Vec<char> = r
        .format
        .pieces
        .iter()
        .filter_map(|p| match p {
            columns::Piece::Column(c)
                if !matches!(c.letter, 'D' | 'N' | 'n' | 'o' | 'A' | 'F' | 'C') =>
            {
                Some(c.letter)
            }
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for partition in partitions {
        let nodes: Vec<&NodeInfo> = cluster
            .nodes
            .iter()
            .filter(|n| partition.is_none_or(|p| n.partitions.contains(&p.name)))
            .filter(|n| wanted_node(n))
            .collect();
        if r.per_node {
            out.extend(nodes.into_iter().map(|n| Line {
                partition,
                nodes: vec![n],
            }));
            continue;
        }
        let mut groups: BTreeMap<Vec<String>, Vec<&NodeInfo>> = BTreeMap::new();
        let mut order: Vec<Vec<String>> = Vec::new();
        for n in nodes {
            let single = Line {
                partition,
                nodes: vec![n],
            };
            let key: Vec<String> = grouped.iter().map(|&l| value(&single, l)).collect();
            if !groups.contains_key(&key) {
                order.push(key.clone());
            }
            groups.entry(key).or_default().push(n);
        }
        if order.is_empty() && partition.is_some() {
            // A partition whose nodes are all filtered out still has its line.
            out.push(Line {
                partition,
                nodes: Vec::new(),
            });
        }
        for key in order {
            out.push(Line {
                partition,
                nodes: groups.remove(&key).unwrap_or_default(),
            });
        }
    }
    // Without the partition's name shown, partitions' lines that show the same merge
    // (their nodes counted once), as sinfo's do.
    let named = r
        .format
        .pieces
        .iter()
        .any(|p| matches!(p, columns::Piece::Column(c) if matches!(c.letter, 'P' | 'R')));
    if shows_partition && !named && !r.per_node {
        let mut merged: Vec<(Vec<String>, Line<'a>)> = Vec::new();
        for line in out {
            let key: Vec<String> = grouped.iter().map(|&l| value(&line, l)).collect();
            match merged.iter_mut().find(|(k, _)| *k == key) {
                Some((_, into)) => {
                    for n in line.nodes {
                        if !into.nodes.iter().any(|m| m.name == n.name) {
                            into.nodes.push(n);
                        }
                    }
                }
                None => merged.push((key, line)),
            }
        }
        return merged.into_iter().map(|(_, l)| l).collect();
    }
    out
}

/// Resolve the `%#` widths: as wide as the widest value (at least the header).
fn fit(format: &mut Format, rows: &[Line<'_>]) {
    for piece in &mut format.pieces {
        if let columns::Piece::Column(c) = piece {
            if c.width == usize::MAX {
                let header = LETTERS
                    .iter()
                    .find(|(l, _)| *l == c.letter)
                    .map_or(0, |(_, h)| h.len());
                let widest = rows
                    .iter()
                    .map(|row| value(row, c.letter).chars().count())
                    .max()
                    .unwrap_or(0);
                c.width = header.max(widest).max(9);
            }
        }
    }
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).ok();
    let mut r = read(&args, &var)?;
    if let Some(early) = &r.early {
        print_lines(early.iter())?;
        return Ok(());
    }
    for w in &r.format.warnings {
        eprintln!("{w}");
    }
    let portal = connect(CMD)?;
    let cluster: Cluster = portal.cluster().await.map_err(failed(CMD))?;
    let rows = lines(&r, &cluster);
    fit(&mut r.format, &rows);
    let mut out = Vec::new();
    if r.long && r.header {
        // The time zone is read only for the date line of `-l`.
        out.push(
            Clock::from_env(CMD)
                .0
                .zoned_now()
                .strftime("%a %b %d %H:%M:%S %Y")
                .to_string(),
        );
    }
    if r.header {
        out.push(columns::render(&r.format, |c: &Column| {
            let header = LETTERS
                .iter()
                .find(|(l, _)| *l == c.letter)
                .map_or("", |(_, h)| *h)
                .to_string();
            (header, !matches!(c.letter, 'N' | 'n'))
        }));
    }
    for row in &rows {
        out.push(columns::render(&r.format, |c| {
            let v = value(row, c.letter);
            // The default partition's `*` survives a cut.
            if c.letter == 'P' && c.width > 0 && v.ends_with('*') && v.chars().count() > c.width {
                let kept: String = v.chars().take(c.width - 1).collect();
                return (format!("{kept}*"), true);
            }
            (v, true)
        }));
    }
    print_lines(out.iter())?;
    Ok(())
}

const USAGE: &str = "Usage: sinfo [OPTIONS]
  -a, --all                  show all partitions (including hidden and those
                             not accessible)
  -d, --dead                 show only non-responding nodes
  -e, --exact                group nodes only on exact match of configuration
      --federation           Report federated information if a member of one
  -h, --noheader             no headers on output
  --hide                     do not show hidden or non-accessible partitions
  -i, --iterate=seconds      specify an iteration period
      --local                show only local cluster in a federation.
                             Overrides --federation.
  -l, --long                 long output - displays more information
  -M, --clusters=names       clusters to issue commands to. Implies --local.
                             NOTE: SlurmDBD must be up.
  -n, --nodes=NODES          report on specific node(s)
  --noconvert                don't convert units from their original type
                             (e.g. 2048M won't be converted to 2G).
  -N, --Node                 Node-centric format
  -o, --format=format        format specification
  -O, --Format=format        long format specification
  -p, --partition=PARTITION  report on specific partition
  -r, --responding           report only responding nodes
  -R, --list-reasons         list reason nodes are down or drained
  -s, --summarize            report state summary only
  -S, --sort=fields          comma separated list of fields to sort on
  -t, --states=node_state    specify the what states of nodes to view
  -T, --reservation          show only reservation information
  -v, --verbose              verbosity level
  -V, --version              output version information and exit

Help options:
  --help                     show this help message
  --usage                    display brief usage message";

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        serde_json::from_value(serde_json::json!({
            "nodes": [
                {"name": "head", "state": {"state": "MIXED"}, "partitions": ["gpu", "short"],
                 "cpus_total": 16, "cpus_free": 8, "memory_mb_total": 64000, "memory_mb_free": 32000,
                 "slices": [{"type": "A100-80GB", "total": 2, "used": 1}]},
                {"name": "n1", "state": {"state": "IDLE"}, "partitions": ["gpu"],
                 "cpus_total": 16, "cpus_free": 16, "memory_mb_total": 64000, "memory_mb_free": 64000},
                {"name": "n2", "state": {"state": "IDLE"}, "partitions": ["gpu"],
                 "cpus_total": 16, "cpus_free": 16, "memory_mb_total": 64000, "memory_mb_free": 64000}
            ],
            "partitions": [
                {"name": "gpu", "default": true, "max_time": "UNLIMITED"},
                {"name": "short", "default": false, "max_time": "02:00:00"}
            ]
        }))
        .expect("cluster")
    }

    fn output(words: &[&str]) -> Vec<String> {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let mut r = read(&args, &|_| None).expect("read");
        let c = cluster();
        let rows = lines(&r, &c);
        fit(&mut r.format, &rows);
        rows.iter()
            .map(|row| columns::render(&r.format, |col| (value(row, col.letter), true)))
            .collect()
    }

    #[test]
    fn the_default_lines_group_each_partitions_nodes_by_state() {
        assert_eq!(
            output(&[]),
            [
                "gpu*         up   infinite      1    mix head",
                "gpu*         up   infinite      2   idle n[1-2]",
                "short        up    2:00:00      1    mix head",
            ]
        );
    }

    #[test]
    fn snakemakes_default_partition_is_the_one_with_a_star() {
        assert_eq!(output(&["-o", "%P"]), ["gpu*", "short"]);
        assert_eq!(
            output(&["-h", "-o", "%R %D"]),
            ["gpu 3", "short 1"],
            "nodes are grouped by what is shown: here by partition alone"
        );
        // Without a partition field, lines gather every partition's nodes.
        assert_eq!(output(&["-o", "%t %D"]), ["mix 1", "idle 2"]);
    }

    #[test]
    fn nodes_one_by_one_and_in_summary() {
        assert_eq!(output(&["-N", "-h"]).len(), 4);
        assert_eq!(
            output(&["-s"])[0],
            "gpu*         up   infinite          1/2/0/3 head,n[1-2]"
        );
        assert_eq!(
            output(&["-t", "idle"]),
            [
                "gpu*         up   infinite      2   idle n[1-2]",
                "short        up    2:00:00      0    n/a "
            ]
        );
    }

    #[test]
    fn mistakes_are_sinfos_own() {
        let lines = |words: &[&str]| {
            let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            read(&args, &|_| None).expect_err("refused").stderr
        };
        assert_eq!(
            lines(&["--st"]),
            [
                "sinfo: option '--states' requires an argument",
                "Try \"sinfo --help\" for more information"
            ]
        );
        assert_eq!(
            lines(&["-t", "bogus"])[0],
            "sinfo: error: Bad state string: \"bogus\""
        );
        assert_eq!(lines(&["-a", "-p", "gpu"]), ["sinfo: error: Conflicting options, -a and -p, specified. Please choose one or the other."]);
    }
}
