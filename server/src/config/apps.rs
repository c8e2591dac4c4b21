//! `[[apps]]`: the interactive apps users start as sessions (Open OnDemand's
//! batch_connect apps): each with its title, icon and form fields, the argv template
//! that starts its server, how the portal knows it is ready, and how the proxy serves
//! it. The built-in apps (`apps.toml` beside this file: JupyterLab, a terminal,
//! TensorBoard, VS Code) are used when the file defines none.
//!
//! Owns: [`AppConfig`], [`FieldConfig`], the placeholders a template may name, the
//! built-in apps and the checks of the list (ids unique, known placeholders, fields
//! bounded, icons from the built-in set or the static folder).
//! Must not touch: sessions themselves (validating a user's values and expanding a
//! template into a script is `sessions`'s).

use std::collections::BTreeSet;

use serde::Deserialize;

use super::check::one_of;

/// The icons shipped in `frontend/icons/apps/` (`/static/icons/apps/<name>.svg`).
pub const ICONS: &[&str] = &["jupyter", "terminal", "tensorboard", "vscode", "r", "app"];

/// What an app's server speaks, beyond HTTP: what the portal does for it.
pub const PROTOCOLS: &[&str] = &["jupyter", "tensorboard", "http"];

/// The kinds of form fields.
pub const FIELD_KINDS: &[&str] = &["number", "select", "text", "checkbox"];

/// Placeholders a command word may name (besides `{field.NAME}`).
pub const PLACEHOLDERS: &[&str] = &[
    "socket",
    "base_url",
    "base_path",
    "logdir",
    "home",
    "user",
    "session_dir",
    "listen",
    "port",
    "token_file",
    "connection_file",
    "kernel",
];

/// Most fields an app may have, and the longest text a text field may take.
pub const MAX_FIELDS: usize = 16;
pub const MAX_TEXT_LENGTH: usize = 1024;
/// Most options of a select field.
pub const MAX_OPTIONS: usize = 64;

const BUILT_IN: &str = include_str!("apps.toml");

/// An app users choose on the start form.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct AppConfig {
    /// Short name, as the API's `kind` takes it and the database records it
    /// (`notebook`).
    pub id: String,
    /// What the form's tile says (`JupyterLab`).
    pub title: String,
    pub description: String,
    /// A built-in icon's name ([`ICONS`]) or a path under the static folder
    /// (`/static/icons/apps/mine.svg`).
    pub icon: String,
    /// `jupyter` (its token exported as `JUPYTER_TOKEN`, kernels' activity counts
    /// against idle culling, the proof extension on a compute node), `tensorboard`
    /// (its unix-socket launcher written beside it) or `http`.
    pub protocol: String,
    /// The server's argv on this machine: it must serve HTTP on `{socket}`.
    pub command: Vec<String>,
    /// The server's argv on a compute node (Slurm): it listens on `{listen}`, on
    /// `{port}` (a free port the script picks and names in the connection file) or
    /// on one of its own that it writes to `{connection_file}`; it must answer only
    /// requests that carry the token of `{token_file}`. Empty: the app does not run
    /// on compute nodes.
    pub node_command: Vec<String>,
    /// When the server is ready: `socket` (its socket accepts a connection) or an
    /// HTTP path under its base URL that must answer 2xx or 3xx (`api/status`).
    pub ready: String,
    /// The proxy strips `/user/<name>/<session>` before passing requests on (for
    /// servers that cannot be told their base URL, such as code-server).
    pub strip_base_path: bool,
    /// Where the browser is sent once it is ready, under the session's prefix
    /// (`lab`, `lab/workspaces/terminal`; empty or `/`: its root).
    pub landing: String,
    /// Environments it may run in (empty: all).
    pub environments: Vec<String>,
    /// Kernelspecs it offers where the environment has them (empty: the
    /// environment's); a command word naming `{kernel}` is repeated for each.
    pub kernels: Vec<String>,
    /// It asks for a log folder (`{logdir}`), confined to the user's roots.
    pub logdir: bool,
    /// JupyterLab opens on a terminal (its `terminal` workspace gets one).
    pub open_terminal: bool,
    /// What the form asks for, passed to the server as `{field.NAME}`.
    pub fields: Vec<FieldConfig>,
    /// A variable the session's token is exported as for the server (besides the
    /// token file), for a server that takes its secret from the environment
    /// (code-server's `HASHED_PASSWORD`). Empty: none.
    pub token_env: String,
    /// A cookie the proxy sends with the session's token on every request, replacing
    /// any of that name from the browser, for a server that checks a cookie rather
    /// than the `Authorization: token …` header the proxy always sends
    /// (code-server's `code-server-session`). Empty: none.
    pub token_cookie: String,
}

/// A form field of an app.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct FieldConfig {
    /// `[a-z][a-z0-9_]*`, at most 32: named `{field.NAME}` in the command, and
    /// `ATRIUM_FIELD_<NAME>` in the server's environment.
    pub name: String,
    pub label: String,
    pub help: String,
    /// `number`, `select`, `text` or `checkbox`.
    pub kind: String,
    /// The value when the user gives none (a checkbox: `true` or `false`).
    pub default: Option<toml::Value>,
    /// Bounds of a number.
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// A number must be whole.
    pub integer: bool,
    /// A select's choices.
    pub options: Vec<String>,
    /// Longest text (default and at most [`MAX_TEXT_LENGTH`]).
    pub max_length: Option<usize>,
    /// A value must be given.
    pub required: bool,
}

impl FieldConfig {
    /// The default as the text a form shows.
    pub fn default_text(&self) -> String {
        match &self.default {
            None => match self.kind.as_str() {
                "checkbox" => "false".into(),
                "select" => self.options.first().cloned().unwrap_or_default(),
                _ => String::new(),
            },
            Some(toml::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        }
    }

    /// The longest text the field takes.
    pub fn max_length(&self) -> usize {
        self.max_length
            .unwrap_or(MAX_TEXT_LENGTH)
            .min(MAX_TEXT_LENGTH)
    }

    /// The variable that carries its value to the server.
    pub fn variable(&self) -> String {
        format!("ATRIUM_FIELD_{}", self.name.to_ascii_uppercase())
    }
}

/// A field's name: `[a-z][a-z0-9_]*`, at most 32.
pub fn is_field_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.as_bytes()[0].is_ascii_lowercase()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// An upper-case variable name: `[A-Z_][A-Z0-9_]*`, at most 64, not one the loader
/// or the shell reads (`LD_…`, `PATH`).
fn is_variable_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.as_bytes()[0].is_ascii_digit()
        && s.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && !s.starts_with("LD_")
        && !matches!(s, "PATH" | "HOME" | "USER" | "SHELL" | "IFS" | "ENV")
}

/// A cookie name the proxy may send (RFC 6265 token characters, conservatively), none
/// that the portal's own cookies could be taken for.
fn is_cookie_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !s.to_ascii_lowercase().contains("atrium")
}

/// The built-in apps: JupyterLab (`notebook`), `terminal`, `tensorboard`, `vscode`.
pub fn built_in() -> Vec<AppConfig> {
    #[derive(Deserialize)]
    struct File {
        apps: Vec<AppConfig>,
    }
    // Checked by a unit test: the embedded file parses and has no problem.
    toml::from_str::<File>(BUILT_IN)
        .map(|f| f.apps)
        .unwrap_or_default()
}

/// The `{…}` placeholders of a command word, in order (`field.x` for fields).
pub fn placeholders_of(word: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = word;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                out.push(&after[..close]);
                rest = &after[close + 1..];
            }
            None => break,
        }
    }
    out
}

impl AppConfig {
    /// Every problem of the app at `apps[i]` but an id used twice.
    fn check(&self, i: usize, environments: &[String], problem: &mut impl FnMut(&str, String)) {
        let key = |k: &str| format!("apps[{i}].{k}");
        if self.title.trim().is_empty() {
            problem(&key("title"), "must not be empty".into());
        }
        one_of(problem, &key("protocol"), &self.protocol, PROTOCOLS);
        if !(ICONS.contains(&self.icon.as_str()) || is_static_path(&self.icon)) {
            problem(
                &key("icon"),
                format!(
                    "{:?} is neither one of {} nor a path under /static/",
                    self.icon,
                    ICONS.join(", ")
                ),
            );
        }
        let fields: BTreeSet<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
        self.check_command("command", &self.command, &fields, i, problem);
        if !self.node_command.is_empty() {
            self.check_command("node_command", &self.node_command, &fields, i, problem);
        }
        if self.ready.trim().is_empty() {
            problem(
                &key("ready"),
                "must be \"socket\" or an HTTP path such as \"api/status\"".into(),
            );
        } else if self
            .ready
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            problem(&key("ready"), "must be a path without spaces".into());
        }
        if self
            .landing
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
            || self.landing.contains("//")
        {
            problem(&key("landing"), "must be a path under the session".into());
        }
        if !self.token_env.is_empty() && !is_variable_name(&self.token_env) {
            problem(
                &key("token_env"),
                format!(
                    "{:?} must be an upper-case variable name ([A-Z_][A-Z0-9_]*, at most 64)",
                    self.token_env
                ),
            );
        }
        if !self.token_cookie.is_empty() && !is_cookie_name(&self.token_cookie) {
            problem(
                &key("token_cookie"),
                format!(
                    "{:?} must be a cookie name of letters, digits, '_', '-' and '.' (at most 64), not one of the portal's (atrium_…)",
                    self.token_cookie
                ),
            );
        }
        for e in &self.environments {
            if !environments.contains(e) {
                problem(&key("environments"), format!("{e:?} is not an environment"));
            }
        }
        if self.fields.len() > MAX_FIELDS {
            problem(&key("fields"), format!("at most {MAX_FIELDS}"));
        }
        let mut seen = BTreeSet::new();
        for (j, f) in self.fields.iter().enumerate() {
            if !seen.insert(f.name.as_str()) {
                problem(
                    &format!("apps[{i}].fields[{j}].name"),
                    format!("{:?} is used twice", f.name),
                );
            }
            f.check(&format!("apps[{i}].fields[{j}]"), problem);
        }
    }

    fn check_command(
        &self,
        which: &str,
        command: &[String],
        fields: &BTreeSet<&str>,
        i: usize,
        problem: &mut impl FnMut(&str, String),
    ) {
        let key = format!("apps[{i}].{which}");
        if command.first().is_none_or(|w| w.trim().is_empty()) {
            problem(&key, "must name a program".into());
            return;
        }
        for word in command {
            if word.contains('\0') {
                problem(&key, "a word holds a NUL byte".into());
            }
            for p in placeholders_of(word) {
                let known = match p.strip_prefix("field.") {
                    Some(name) => fields.contains(name),
                    None => PLACEHOLDERS.contains(&p),
                };
                if !known {
                    problem(&key, format!("{{{p}}} is not a placeholder"));
                }
            }
        }
        let names = |p: &str| command.iter().any(|w| placeholders_of(w).contains(&p));
        if which == "command" && !names("socket") {
            problem(
                &key,
                "must listen on {socket} (name it in an argument)".into(),
            );
        }
        if which == "node_command"
            && !(names("listen") && (names("port") || names("connection_file")))
        {
            problem(
                &key,
                "must listen on {listen} and {port} (or name its port in {connection_file})".into(),
            );
        }
    }
}

impl FieldConfig {
    fn check(&self, key: &str, problem: &mut impl FnMut(&str, String)) {
        if !is_field_name(&self.name) {
            problem(
                &format!("{key}.name"),
                format!(
                    "{:?} must be 1-32 lower-case letters, digits or '_', starting with a letter",
                    self.name
                ),
            );
        }
        one_of(problem, &format!("{key}.kind"), &self.kind, FIELD_KINDS);
        if let (Some(min), Some(max)) = (self.min, self.max) {
            if min > max {
                problem(&format!("{key}.max"), "must not be below min".into());
            }
        }
        if self.kind == "select" && self.options.is_empty() {
            problem(&format!("{key}.options"), "a select needs options".into());
        }
        if self.options.len() > MAX_OPTIONS {
            problem(&format!("{key}.options"), format!("at most {MAX_OPTIONS}"));
        }
        if self
            .max_length
            .is_some_and(|n| n == 0 || n > MAX_TEXT_LENGTH)
        {
            problem(
                &format!("{key}.max_length"),
                format!("must be 1 to {MAX_TEXT_LENGTH}"),
            );
        }
        if let Some(d) = &self.default {
            let fine = match (self.kind.as_str(), d) {
                ("number", toml::Value::Integer(_) | toml::Value::Float(_)) => true,
                ("checkbox", toml::Value::Boolean(_)) => true,
                ("select", toml::Value::String(s)) => self.options.contains(s),
                ("text", toml::Value::String(s)) => s.len() <= self.max_length(),
                _ => false,
            };
            if !fine {
                problem(
                    &format!("{key}.default"),
                    format!("is not a value a {} field takes", self.kind),
                );
            }
        }
    }
}

/// `/static/…` with plain path characters and no `..`.
fn is_static_path(s: &str) -> bool {
    s.strip_prefix("/static/").is_some_and(|rest| {
        !rest.is_empty()
            && !rest.contains("..")
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.'))
    })
}

/// Every problem of `[[apps]]`: each app's, and ids used twice or malformed.
pub(super) fn check(
    apps: &[AppConfig],
    environments: &[String],
    problem: &mut impl FnMut(&str, String),
) {
    let mut seen = BTreeSet::new();
    for (i, app) in apps.iter().enumerate() {
        if !super::environments::is_name(&app.id) {
            problem(
                &format!("apps[{i}].id"),
                format!("{:?} must be 1-64 letters, digits, '-', '_' or '.'", app.id),
            );
        } else if !seen.insert(app.id.as_str()) {
            problem(
                &format!("apps[{i}].id"),
                format!("{:?} is used twice", app.id),
            );
        }
        app.check(i, environments, problem);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_reported, load_str, problem_keys};
    use super::*;

    #[test]
    fn the_built_in_apps_parse_and_pass_their_checks() {
        let apps = built_in();
        let ids: Vec<&str> = apps.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["notebook", "terminal", "tensorboard", "vscode"]);
        let mut problems = Vec::new();
        check(&apps, &[], &mut |k: &str, m: String| {
            problems.push(format!("{k}: {m}"))
        });
        assert!(problems.is_empty(), "{problems:?}");
        let loaded = load_str("", &[]);
        assert_eq!(loaded.config.apps(), apps, "no [[apps]]: the built-in ones");
    }

    #[test]
    fn a_configured_app_replaces_the_built_in_ones() {
        let loaded = load_str(
            r#"
[[apps]]
id = "rstudio"
title = "RStudio"
icon = "r"
protocol = "http"
command = ["/usr/lib/rstudio-server/bin/rserver", "--www-socket={socket}", "--cores={field.cores}"]
ready = "socket"
strip_base_path = true
[[apps.fields]]
name = "cores"
kind = "number"
min = 1
max = 8
integer = true
default = 2
"#,
            &[],
        );
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        let apps = loaded.config.apps();
        assert_eq!(apps.len(), 1);
        assert_eq!(apps[0].fields[0].default_text(), "2");
        assert_eq!(apps[0].fields[0].variable(), "ATRIUM_FIELD_CORES");
    }

    #[test]
    fn every_problem_of_an_app_is_named() {
        let loaded = load_str(
            r#"
[[environments]]
name = "py"
[[apps]]
id = "a"
title = ""
icon = "../etc/passwd"
protocol = "gopher"
command = ["server", "--on={nowhere}", "{field.missing}"]
ready = ""
environments = ["r-4"]
[[apps.fields]]
name = "Bad Name"
kind = "slider"
[[apps.fields]]
name = "n"
kind = "number"
min = 5
max = 1
default = "five"
[[apps.fields]]
name = "pick"
kind = "select"
[[apps]]
id = "a"
title = "again"
icon = "app"
protocol = "http"
command = ["server", "{socket}"]
node_command = ["server", "--port=8000"]
ready = "socket"
"#,
            &[],
        );
        assert_reported(
            &loaded,
            &[
                "apps[0].title",
                "apps[0].icon",
                "apps[0].protocol",
                "apps[0].command",
                "apps[0].ready",
                "apps[0].environments",
                "apps[0].fields[0].name",
                "apps[0].fields[0].kind",
                "apps[0].fields[1].max",
                "apps[0].fields[1].default",
                "apps[0].fields[2].options",
                "apps[1].id",
                "apps[1].node_command",
            ],
        );
        let messages: Vec<String> = loaded.problems.iter().map(|p| p.to_string()).collect();
        assert!(
            messages
                .iter()
                .any(|m| m == "apps[0].command: {nowhere} is not a placeholder"),
            "{messages:?}"
        );
        assert!(
            messages
                .iter()
                .any(|m| m == "apps[0].command: {field.missing} is not a placeholder"),
            "{messages:?}"
        );
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with("apps[0].command: must listen on {socket}")),
            "{messages:?}"
        );
        assert!(!problem_keys(&loaded).contains(&"apps[1].command"));
    }

    #[test]
    fn placeholders_are_found_in_order() {
        assert_eq!(
            placeholders_of("--a={socket}x{field.n}{"),
            ["socket", "field.n"]
        );
        assert!(placeholders_of("plain").is_empty());
    }
}
