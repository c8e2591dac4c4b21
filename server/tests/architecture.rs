//! The module boundaries of `ARCHITECTURE.md`, checked on the source: every cell of
//! its "must not touch" column (the table read from the file, so the map and the
//! check cannot drift apart), no two modules import each other (directly or round a
//! loop), the scheduler's backends do not import each other, sessions see no Slurm
//! types, the HTTP layer holds no store or scheduler, the command line writes no
//! row, and the Slurm-style client crate depends on nothing of the server's.
//!
//! The check reads `use` trees and `crate::`/`super::` paths of every file under
//! `src/` (test modules left out) and builds the graph of modules at one depth.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).expect("read src");
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file is: `src/sched/slurm/mod.rs` → `sched::slurm`.
fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).expect("under src");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// `a::{b, c::{d}}` → `a::b`, `a::c::d`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        return vec![path.trim().to_string()];
    };
    let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
    let (prefix, body) = (&tree[..open], &tree[open + 1..close]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(p).into_iter().map(|e| format!("{prefix}{e}")))
        .collect()
}

/// The module a path names, from inside `module`; `None` for other crates.
fn resolve(module: &[String], path: &str) -> Option<Module> {
    let segments: Vec<&str> = path.split("::").map(str::trim).collect();
    match segments.first()? {
        &"crate" => Some(segments[1..].iter().map(|s| s.to_string()).collect()),
        &"super" | &"self" => {
            let mut base = module.to_vec();
            let mut rest = segments.as_slice();
            while let Some(first) = rest.first() {
                match *first {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
            base.extend(rest.iter().map(|s| s.to_string()));
            Some(base)
        }
        _ => None,
    }
}

/// Each module's source with its test module and comments left out.
fn modules() -> Vec<(Module, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files
        .into_iter()
        .filter(|f| !f.ends_with("tests.rs") && !f.components().any(|c| c.as_os_str() == "tests"))
        .map(|f| {
            let text = std::fs::read_to_string(&f).expect("read source");
            // A module's tests (`mod tests`, `pub(super) mod tests`) are not its
            // dependencies.
            let cut = [
                "#[cfg(test)]\nmod tests",
                "#[cfg(test)]\npub(super) mod tests",
            ]
            .iter()
            .filter_map(|marker| text.find(marker))
            .min();
            let text = match cut {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            let text: String = text
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            (module_of(&root, &f), text)
        })
        .collect()
}

/// Every path a source names: `use` trees expanded, and `crate::…`/`super::…` paths.
fn paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // `use` items start a line (after `pub`, `pub(crate)` …) and end at `;`.
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let item = trimmed
            .strip_prefix("pub ")
            .or_else(|| {
                trimmed
                    .strip_prefix("pub(")
                    .and_then(|r| r.split_once(") ").map(|(_, r)| r))
            })
            .unwrap_or(trimmed);
        if let Some(tree) = item.strip_prefix("use ") {
            let start = offset + (line.len() - tree.len());
            if let Some(end) = text[start..].find(';') {
                out.extend(expand(&text[start..start + end]));
            }
        }
        offset += line.len();
    }
    for start in ["crate::", "super::"] {
        let mut rest = text;
        while let Some(i) = rest.find(start) {
            let before = rest[..i].chars().last();
            let tail = &rest[i..];
            let len = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                out.push(tail[..len].trim_end_matches(':').to_string());
            }
            rest = &tail[len.max(1)..];
        }
    }
    out
}

/// Edges between modules `depth` deep that share their first `depth - 1` names.
fn graph(depth: usize) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, text) in modules() {
        if module.len() < depth {
            continue;
        }
        let from: Module = module[..depth].to_vec();
        for path in paths(&text) {
            let Some(target) = resolve(&module, &path) else {
                continue;
            };
            if target.len() < depth || target[..depth - 1] != from[..depth - 1] {
                continue;
            }
            let to: Module = target[..depth].to_vec();
            if to != from {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

/// The loops of the graph: strongly connected components of more than one module.
fn loops(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    // Kosaraju: finish order on the graph, then components on the reverse.
    fn visit(
        v: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        seen: &mut BTreeSet<Module>,
        order: &mut Vec<Module>,
    ) {
        if !seen.insert(v.clone()) {
            return;
        }
        for w in edges.get(v).into_iter().flatten() {
            visit(w, edges, seen, order);
        }
        order.push(v.clone());
    }
    let mut reverse: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let mut nodes: BTreeSet<Module> = BTreeSet::new();
    for (a, bs) in edges {
        nodes.insert(a.clone());
        for b in bs {
            nodes.insert(b.clone());
            reverse.entry(b.clone()).or_default().insert(a.clone());
        }
    }
    let (mut seen, mut order) = (BTreeSet::new(), Vec::new());
    for v in &nodes {
        visit(v, edges, &mut seen, &mut order);
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for v in order.iter().rev() {
        let mut component = Vec::new();
        visit(v, &reverse, &mut seen, &mut component);
        if component.len() > 1 {
            let mut names: Vec<String> = component.iter().map(|m| m.join("::")).collect();
            names.sort();
            out.push(names);
        }
    }
    out
}

#[test]
fn no_two_modules_import_each_other() {
    for depth in 1..=3 {
        let found = loops(&graph(depth));
        assert!(
            found.is_empty(),
            "modules in a loop at depth {depth}: {found:?}"
        );
    }
}

#[test]
fn a_loop_would_be_found() {
    let a: Module = vec!["a".into()];
    let b: Module = vec!["b".into()];
    let edges = BTreeMap::from([
        (a.clone(), BTreeSet::from([b.clone()])),
        (b.clone(), BTreeSet::from([a.clone()])),
    ]);
    assert_eq!(loops(&edges), vec![vec!["a".to_string(), "b".to_string()]]);
    assert_eq!(
        expand("crate::{a::{b, c}, d as e}"),
        vec!["crate::a::b", "crate::a::c", "crate::d"]
    );
    assert_eq!(
        resolve(&["x".into(), "y".into()], "super::z::W"),
        Some(vec!["x".to_string(), "z".to_string(), "W".to_string()])
    );
}

#[test]
fn the_layers_import_only_downwards() {
    let edges = graph(1);
    let imports = |from: &str| -> BTreeSet<String> {
        edges
            .get(&vec![from.to_string()])
            .into_iter()
            .flatten()
            .map(|m| m.join("::"))
            .collect()
    };
    // Leaves: they import nothing of the crate.
    for leaf in ["util", "domain"] {
        assert!(
            imports(leaf).is_empty(),
            "{leaf} imports {:?}",
            imports(leaf)
        );
    }
    // Nothing below HTTP imports it; the application layer imports no handler.
    for (module, deps) in &edges {
        let name = module.join("::");
        if !matches!(name.as_str(), "http" | "startup" | "cli" | "") {
            assert!(
                !deps.contains(&vec!["http".to_string()]),
                "{name} imports http"
            );
        }
    }
    assert!(
        !imports("services").contains("sessions"),
        "services import sessions"
    );
    assert!(
        !imports("sched").contains("services"),
        "sched imports services"
    );
    // `atrium doctor` is a top: only the command line runs it, and it serves nothing.
    for (module, deps) in &edges {
        let name = module.join("::");
        if !matches!(name.as_str(), "cli" | "doctor" | "") {
            assert!(
                !deps.contains(&vec!["doctor".to_string()]),
                "{name} imports doctor"
            );
        }
    }
    assert!(!imports("doctor").contains("http"), "doctor imports http");
}

/// The modules `module` (and everything under it) imports, as paths.
fn targets_of(module: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (m, text) in modules() {
        if m.len() < module.len() || m[..module.len()] != *module {
            continue;
        }
        for path in paths(&text) {
            if let Some(t) = resolve(&m, &path) {
                out.insert(t.join("::"));
            }
        }
    }
    out
}

#[test]
fn the_scheduler_backends_and_sessions_stay_apart() {
    let reaches = |from: &[&str], to: &str| -> Vec<String> {
        targets_of(from)
            .into_iter()
            .filter(|t| t == to || t.starts_with(&format!("{to}::")))
            .collect()
    };
    let found = reaches(&["sched", "internal"], "sched::slurm");
    assert!(
        found.is_empty(),
        "the internal backend imports Slurm's: {found:?}"
    );
    let found = reaches(&["sched", "slurm"], "sched::internal");
    assert!(
        found.is_empty(),
        "the Slurm backend imports the internal one: {found:?}"
    );
    let found = reaches(&["sessions"], "sched::slurm");
    assert!(found.is_empty(), "sessions import Slurm's types: {found:?}");
}

/// The dependencies a manifest names, section by section: `[dependencies]`,
/// `[dev-dependencies]`, `[build-dependencies]` and their `[target.….*]` forms.
fn dependencies(manifest: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in manifest.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
        } else if section.ends_with("dependencies") && !line.starts_with('#') {
            if let Some((name, spec)) = line.split_once('=') {
                out.push((name.trim().to_string(), spec.trim().to_string()));
            }
        }
    }
    out
}

#[test]
fn the_client_crate_depends_on_nothing_of_the_server() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../client/Cargo.toml");
    let manifest = std::fs::read_to_string(manifest).expect("read client/Cargo.toml");
    let deps = dependencies(&manifest);
    assert!(deps.iter().any(|(name, _)| name == "reqwest"), "{deps:?}");
    for (name, spec) in &deps {
        // HTTP only: of the workspace, only the pure scheduler library (for the one
        // table of sbatch's options, so that `atrium sbatch` reads argv as sbatch
        // does); never the server, a database or the configuration file.
        assert!(
            !spec.contains("path") || name == "scheduler",
            "the client depends on a workspace crate: {name} = {spec}"
        );
        assert!(
            !["atrium", "sqlx", "toml"].contains(&name.as_str()),
            "the client depends on {name}"
        );
    }
}

/// The command line writes no row itself: `atrium user …` goes through the services
/// (`services::account_changes`), so its changes and their audit entries are the
/// portal's. It may read (accounts, groups, quotas), back the database up and close
/// it.
#[test]
fn the_command_line_writes_through_the_services() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli.rs"))
        .expect("cli.rs");
    let reads = [
        "user_by_name",
        "list_users",
        "groups_of",
        "quotas",
        "backup_into",
        "close",
        "clone",
    ];
    // Every `store.method(` call, across line breaks (`store\n    .method(`).
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join("");
    let mut called = BTreeSet::new();
    for (i, _) in flat.match_indices("store.") {
        let rest = &flat[i + "store.".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if rest[name.len()..].starts_with('(') {
            called.insert(name);
        }
    }
    let writes: Vec<&String> = called
        .iter()
        .filter(|m| !reads.contains(&m.as_str()))
        .collect();
    assert!(
        writes.is_empty(),
        "cli.rs calls the store's {writes:?}: write through a service"
    );
    assert!(
        called.contains("user_by_name"),
        "the check reads the calls: {called:?}"
    );
    assert!(!text.contains("NewAuditEntry"), "cli.rs writes audit rows");
}

/// No handler reads the database, the scheduler or the GPU inventory off the state:
/// the pages and the API reach them through the portal's services. Read on the
/// sources of `http/`: no `state.scheduler`, `state.inventory` or `state.store`
/// (over line breaks too). What `http/` imports is the table test's (its row names
/// `store`, `sched::handle`, `sched::Scheduler`, `sched::inventory`).
#[test]
fn the_http_layer_reaches_the_scheduler_only_through_the_services() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 20, "the http sources are read: {files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let flat: String = text.split_whitespace().collect::<Vec<_>>().join("");
        for banned in ["state.scheduler", "state.inventory", "state.store"] {
            assert!(
                !flat.contains(banned),
                "{} names {banned}: go through a service",
                file.display()
            );
        }
    }
}

/// The rows of ARCHITECTURE.md's table of `server/src` modules: the modules a row
/// names (its first cell) and its "must not touch" cell.
fn boundary_rows() -> Vec<(Vec<String>, String)> {
    let map =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
            .expect("read ARCHITECTURE.md");
    let start = map
        .find("| module | owns | must not touch |")
        .expect("the table of modules");
    let mut rows = Vec::new();
    for line in map[start..].lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        let (Some(first), Some(last)) = (cells.first(), cells.last()) else {
            continue;
        };
        rows.push((ticked(first), last.trim().to_string()));
    }
    rows
}

/// The `ticked` names of a cell, a folder's `/` left off.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|t| t.trim_end_matches('/').to_string())
        .collect()
}

/// What a "must not touch" cell checks: before its first `: `, either names the
/// module must not import (`store`, `sched::slurm`, a crate such as `sqlx`, or
/// `crate`: nothing of the crate), or `all but` the only modules of the crate it may
/// import. After the colon, the words are for people.
#[derive(Debug)]
enum Rule {
    Never(Vec<String>),
    OnlyOf(Vec<String>),
}

fn rule_of(cell: &str) -> Option<Rule> {
    let (checked, _) = cell.split_once(": ").unwrap_or((cell, ""));
    let names = ticked(checked);
    if names.is_empty() {
        return None;
    }
    Some(if checked.trim_start().starts_with("all but") {
        Rule::OnlyOf(names)
    } else {
        Rule::Never(names)
    })
}

/// Whether `text` names `path` as a path's start (`sqlx::query`, `use tokio::…`).
fn names_path(text: &str, path: &str) -> bool {
    text.match_indices(path).any(|(i, _)| {
        let before = text[..i].chars().last();
        let after = &text[i + path.len()..];
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            && (after.starts_with("::") || after.starts_with(';') || after.starts_with(" as "))
    })
}

/// ARCHITECTURE.md's "must not touch" column, every cell checked on the source: the
/// table names every module of `src/`, each row (but the top's) says what it must
/// not import, and no module imports it.
#[test]
fn every_module_keeps_off_what_the_map_says_it_must_not_touch() {
    let rows = boundary_rows();
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    let crate_modules: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    let mapped: BTreeSet<String> = rows
        .iter()
        .flat_map(|(modules, _)| modules.iter().filter(|m| !m.contains("::")).cloned())
        .collect();
    let unmapped: Vec<&String> = crate_modules.difference(&mapped).collect();
    assert!(
        unmapped.is_empty(),
        "ARCHITECTURE.md's table lacks {unmapped:?}"
    );
    let sources = modules();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (row, cell) in &rows {
        let Some(rule) = rule_of(cell) else {
            assert!(
                cell.starts_with("—"),
                "{row:?}: a \"must not touch\" cell with nothing to check"
            );
            continue;
        };
        for module in row
            .iter()
            .filter(|m| crate_modules.contains(m.split("::").next().unwrap_or("")))
        {
            let here: Vec<String> = module.split("::").map(str::to_string).collect();
            let mine = |m: &Module| m.len() >= here.len() && m[..here.len()] == here[..];
            let own: Vec<&(Module, String)> = sources.iter().filter(|(m, _)| mine(m)).collect();
            assert!(!own.is_empty(), "{module}: no source");
            // The modules of the crate it imports, and the paths it names.
            let mut imports = BTreeSet::new();
            for (m, text) in &own {
                for path in paths(text) {
                    if let Some(target) = resolve(m, &path) {
                        if !target.is_empty() && !mine(&target) {
                            imports.insert(target.join("::"));
                        }
                    }
                }
            }
            let reaches = |name: &str| -> Vec<String> {
                imports
                    .iter()
                    .filter(|t| *t == name || t.starts_with(&format!("{name}::")))
                    .cloned()
                    .collect()
            };
            match &rule {
                Rule::Never(names) => {
                    for name in names {
                        checked += 1;
                        let found = if name == "crate" {
                            imports.iter().cloned().collect()
                        } else if crate_modules.contains(name.split("::").next().unwrap_or("")) {
                            reaches(name)
                        } else {
                            own.iter()
                                .filter(|(_, text)| names_path(text, name))
                                .map(|(m, _)| m.join("::"))
                                .collect()
                        };
                        if !found.is_empty() {
                            failures.push(format!("{module} must not touch {name}: {found:?}"));
                        }
                    }
                }
                Rule::OnlyOf(allowed) => {
                    checked += 1;
                    let other: Vec<&String> = imports
                        .iter()
                        .filter(|t| {
                            !allowed
                                .iter()
                                .any(|a| *t == a || t.starts_with(&format!("{a}::")))
                        })
                        .collect();
                    if !other.is_empty() {
                        failures.push(format!("{module} may import only {allowed:?}: {other:?}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked > 40, "the cells are read: {checked} checks");
}

#[test]
fn a_rule_is_read_from_its_cell() {
    assert!(matches!(
        rule_of("`store`, `sched::slurm`: the store, Slurm's types (it sees `sched::SessionHost`)"),
        Some(Rule::Never(n)) if n == ["store", "sched::slurm"]
    ));
    assert!(matches!(
        rule_of("all but `domain`, `util`: everything else"),
        Some(Rule::OnlyOf(n)) if n == ["domain", "util"]
    ));
    assert!(rule_of("—").is_none());
    assert!(names_path("let x = sqlx::query(q);", "sqlx"));
    assert!(!names_path("let x = my_sqlx::query(q);", "sqlx"));
    assert!(names_path("use std::fs;", "std::fs"));
}
