//! The batch script that runs a session's server, and the environment it reads.
//! User-given values (the session name, the log folder) reach the script only through
//! environment variables, quoted where they are used: nothing a user types is ever
//! interpolated into shell text. Pure functions, tested with exact output.
//! Must not touch: processes, the database or the scheduler.

use std::path::Path;

use super::apps::{App, Protocol};
use crate::config::is_field_name;

/// The socket the server listens on, inside the session's directory.
pub const SOCKET: &str = "server.sock";
/// TensorBoard's unix-socket launcher, written into the session's directory.
pub const TENSORBOARD_LAUNCHER: &str = "tensorboard_unix.py";
pub const TENSORBOARD_LAUNCHER_SOURCE: &str = include_str!("tensorboard_unix.py");
/// The Jupyter Server extension that proves a session's server knows its token (on a
/// compute node), written into the session's directory.
pub const PROOF_EXTENSION: &str = "atrium_proof.py";
pub const PROOF_EXTENSION_SOURCE: &str = include_str!("atrium_proof.py");

/// The file a session reads its token from (0600, the user's).
pub const TOKEN_FILE: &str = "token";
/// The file a session on a compute node writes once it knows its port.
pub const CONNECTION_FILE: &str = "connection.json";

/// Where the server listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    /// `$ATRIUM_SESSION_SOCKET`, on this machine.
    Socket,
    /// A free TCP port on `$ATRIUM_SESSION_LISTEN` of the compute node, written to
    /// the connection file; the token comes from the token file.
    Tcp,
}

/// What the script is built from.
#[derive(Debug, Clone)]
pub struct ScriptInput<'a> {
    pub app: &'a App,
    pub listen: Listen,
    /// Kernelspecs the server may offer (`{kernel}`); empty: all installed.
    pub kernels: &'a [String],
    /// The environment's own server command, instead of the app's.
    pub command: Option<&'a [String]>,
}

/// Single-quote `s` for `sh`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script's text: the token where the server reads it, on a compute node the
/// port it listens on, then the app's command with its placeholders as variables.
pub fn script(input: &ScriptInput<'_>) -> String {
    let app = input.app;
    let jupyter = app.protocol == Protocol::Jupyter;
    let command: &[String] = match (input.command, input.listen) {
        (Some(c), _) => c,
        (None, Listen::Socket) => &app.config.command,
        (None, Listen::Tcp) => &app.config.node_command,
    };
    let mut out = String::from("#!/bin/sh\n");
    match input.listen {
        Listen::Socket => {
            out.push_str(&format!(
                "# atrium {} session: its server listens on $ATRIUM_SESSION_SOCKET.\n",
                app.id()
            ));
            // The token from its file, never from the job's environment (which is stored).
            if jupyter || input.command.is_some() {
                out.push_str(TOKEN_FROM_FILE);
            }
        }
        Listen::Tcp => {
            out.push_str(&format!(
                "# atrium {} session on a compute node: its server listens on a TCP port of\n\
                 # $ATRIUM_SESSION_LISTEN, named in $ATRIUM_SESSION_DIR/{CONNECTION_FILE}.\n\
                 set -e\n",
                app.id()
            ));
            if jupyter {
                out.push_str(TOKEN_FROM_FILE);
            }
            if command.iter().any(|w| w.contains("{port}")) {
                out.push_str(&free_port());
            }
            if jupyter {
                // The proof extension answers the portal's challenge with the token.
                out.push_str(
                    "PYTHONPATH=\"$ATRIUM_SESSION_DIR${PYTHONPATH:+:$PYTHONPATH}\"\nexport PYTHONPATH\n",
                );
            }
        }
    }
    let token_env = &app.config.token_env;
    // Jupyter's own variable is exported above already.
    let nothing_more = token_env.is_empty() || (jupyter && token_env == "JUPYTER_TOKEN");
    if !nothing_more {
        // The name was checked (`config::apps`): an upper-case variable name.
        out.push_str(&format!(
            "{token_env}=$(cat \"$ATRIUM_SESSION_DIR/{TOKEN_FILE}\")\nexport {token_env}\n"
        ));
    }
    let words: Vec<String> = command
        .iter()
        .flat_map(|w| expand(w, input.kernels))
        .collect();
    out.push_str(&format!("exec {}\n", words.join(" \\\n  ")));
    out
}

const TOKEN_FROM_FILE: &str =
    "JUPYTER_TOKEN=$(cat \"$ATRIUM_SESSION_DIR/token\")\nexport JUPYTER_TOKEN\n";

/// A free port of `$ATRIUM_SESSION_LISTEN` in `$port`, named in the connection file.
fn free_port() -> String {
    format!(
        "port=$(python3 -c 'import os, socket\n\
         a = os.environ[\"ATRIUM_SESSION_LISTEN\"]\n\
         s = socket.socket(socket.AF_INET6 if \":\" in a else socket.AF_INET)\n\
         s.bind((a, 0))\n\
         print(s.getsockname()[1])')\n\
         printf '{{\"host\": \"%s\", \"port\": %s}}\\n' \"$(hostname)\" \"$port\" \
         >\"$ATRIUM_SESSION_DIR/{CONNECTION_FILE}.new\"\n\
         mv -f \"$ATRIUM_SESSION_DIR/{CONNECTION_FILE}.new\" \"$ATRIUM_SESSION_DIR/{CONNECTION_FILE}\"\n"
    )
}

/// The shell text a placeholder stands for: always a variable (quoted), never a
/// value, so that nothing a user typed becomes shell text.
fn variable(placeholder: &str) -> Option<String> {
    let fixed = match placeholder {
        "socket" => "\"$ATRIUM_SESSION_SOCKET\"",
        "base_url" => "\"$ATRIUM_BASE_URL\"",
        "base_path" => "\"${ATRIUM_BASE_URL%/}\"",
        "logdir" => "\"$ATRIUM_LOGDIR\"",
        "home" => "\"$HOME\"",
        "user" => "\"$USER\"",
        "session_dir" => "\"$ATRIUM_SESSION_DIR\"",
        "listen" => "\"$ATRIUM_SESSION_LISTEN\"",
        "port" => "\"$port\"",
        "token_file" => "\"$ATRIUM_SESSION_DIR/token\"",
        "connection_file" => "\"$ATRIUM_SESSION_DIR/connection.json\"",
        other => {
            let name = other.strip_prefix("field.")?;
            return is_field_name(name)
                .then(|| format!("\"$ATRIUM_FIELD_{}\"", name.to_ascii_uppercase()));
        }
    };
    Some(fixed.to_string())
}

/// A command word as shell words: literal text single-quoted, placeholders as the
/// variables that hold them. A word naming `{kernel}` is repeated once per kernel
/// (an administrator's kernelspec names, quoted), and left out when there is none.
fn expand(word: &str, kernels: &[String]) -> Vec<String> {
    if word.contains("{kernel}") {
        return kernels.iter().map(|k| one_word(word, Some(k))).collect();
    }
    vec![one_word(word, None)]
}

fn one_word(word: &str, kernel: Option<&str>) -> String {
    let mut out = String::new();
    let mut literal = String::new();
    let flush = |literal: &mut String, out: &mut String| {
        if !literal.is_empty() {
            out.push_str(&sh_quote(literal));
            literal.clear();
        }
    };
    let mut rest = word;
    while !rest.is_empty() {
        let found = rest.strip_prefix('{').and_then(|after| {
            let close = after.find('}')?;
            let name = &after[..close];
            let text = match (name, kernel) {
                ("kernel", Some(k)) => Some(sh_quote(k)),
                _ => variable(name),
            }?;
            Some((text, close + 2))
        });
        match found {
            Some((text, used)) => {
                flush(&mut literal, &mut out);
                out.push_str(&text);
                rest = &rest[used..];
            }
            None => {
                let c = rest.chars().next().unwrap_or_default();
                literal.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    flush(&mut literal, &mut out);
    if out.is_empty() {
        out.push_str("''");
    }
    out
}

/// The variables the script reads (a server on this machine's unix socket).
pub fn environment(dir: &Path, base_url: &str, logdir: Option<&str>) -> Vec<(String, String)> {
    let mut env = common_environment(dir, base_url, logdir);
    env.push((
        "ATRIUM_SESSION_SOCKET".into(),
        dir.join(SOCKET).display().to_string(),
    ));
    env
}

/// The variables the script reads on a compute node: the address to listen on, and
/// no secret (the token is in the token file).
pub fn tcp_environment(
    dir: &Path,
    base_url: &str,
    listen: &str,
    logdir: Option<&str>,
) -> Vec<(String, String)> {
    let mut env = common_environment(dir, base_url, logdir);
    env.push(("ATRIUM_SESSION_LISTEN".into(), listen.to_string()));
    env
}

/// The connection file as the session's script writes it.
#[derive(Debug, serde::Deserialize)]
struct Connection {
    port: u16,
}

/// The port a connection file names (`None`: empty, not written yet). The user writes
/// the file, so only a port above the privileged range is taken.
pub fn connection_port(text: &str) -> Result<Option<u16>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let connection: Connection =
        serde_json::from_str(text).map_err(|e| format!("not a connection file: {e}"))?;
    if connection.port < 1024 {
        return Err(format!(
            "names port {}: a session listens on a port above 1023",
            connection.port
        ));
    }
    Ok(Some(connection.port))
}

fn common_environment(dir: &Path, base_url: &str, logdir: Option<&str>) -> Vec<(String, String)> {
    let mut env = vec![
        ("ATRIUM_SESSION_DIR".into(), dir.display().to_string()),
        ("ATRIUM_BASE_URL".into(), base_url.to_string()),
        (
            "JUPYTER_RUNTIME_DIR".into(),
            dir.join("runtime").display().to_string(),
        ),
    ];
    if let Some(l) = logdir {
        env.push(("ATRIUM_LOGDIR".into(), l.to_string()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AppConfig;

    fn built_in(id: &str) -> App {
        let config = crate::config::Config::default()
            .apps()
            .into_iter()
            .find(|a| a.id == id)
            .expect("a built-in app");
        App::new(config)
    }

    fn app(command: &[&str]) -> App {
        App::new(AppConfig {
            id: "x".into(),
            protocol: "http".into(),
            command: command.iter().map(|w| w.to_string()).collect(),
            ..Default::default()
        })
    }

    fn local(app: &App, kernels: &[String]) -> String {
        script(&ScriptInput {
            app,
            listen: Listen::Socket,
            kernels,
            command: None,
        })
    }

    fn on_node(app: &App) -> String {
        script(&ScriptInput {
            app,
            listen: Listen::Tcp,
            kernels: &[],
            command: None,
        })
    }

    #[test]
    fn a_connection_file_names_an_unprivileged_port() {
        assert_eq!(connection_port(""), Ok(None));
        assert_eq!(
            connection_port("{\"host\": \"gpu07\", \"port\": 41234}\n"),
            Ok(Some(41234))
        );
        assert!(connection_port("{\"host\": \"gpu07\", \"port\": 22}").is_err());
        assert!(connection_port("{\"port\": 70000}").is_err());
        assert!(connection_port("port=8888").is_err());
    }

    #[test]
    fn notebook_runs_jupyterlab_on_the_socket_with_only_the_chosen_kernels() {
        let kernels = vec!["python3".to_string(), "ir".to_string()];
        let s = local(&built_in("notebook"), &kernels);
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(
            s.contains("exec 'jupyter' \\\n  'lab' \\\n  '--no-browser'"),
            "{s}"
        );
        assert!(
            s.contains("'--sock='\"$ATRIUM_SESSION_SOCKET\" \\\n  '--sock-mode=0600'"),
            "{s}"
        );
        assert!(
            s.contains("'--ServerApp.base_url='\"$ATRIUM_BASE_URL\""),
            "{s}"
        );
        assert!(
            s.contains("'--ServerApp.tornado_settings=user='\"$USER\""),
            "{s}"
        );
        assert!(
            s.contains("'--ServerApp.tornado_settings=hub_prefix=/hub/'"),
            "{s}"
        );
        assert!(s.contains("'--KernelSpecManager.allowed_kernelspecs=''python3'"));
        assert!(s.contains("'--KernelSpecManager.allowed_kernelspecs=''ir'"));
        // No kernel named: the word is left out (every kernel installed is offered).
        let all = local(&built_in("notebook"), &[]);
        assert!(!all.contains("allowed_kernelspecs"), "{all}");
    }

    #[test]
    fn tensorboard_reads_its_folder_from_the_environment() {
        let s = local(&built_in("tensorboard"), &[]);
        assert!(s.contains("'--logdir' \\\n  \"$ATRIUM_LOGDIR\""), "{s}");
        assert!(
            s.contains("'--path_prefix' \\\n  \"${ATRIUM_BASE_URL%/}\""),
            "{s}"
        );
        assert!(
            s.contains("\"$ATRIUM_SESSION_DIR\"'/tensorboard_unix.py'"),
            "{s}"
        );
        assert!(!s.contains("JUPYTER_TOKEN"), "{s}");
    }

    #[test]
    fn code_server_listens_on_the_socket_and_checks_the_sessions_token() {
        let s = local(&built_in("vscode"), &[]);
        assert!(
            s.contains("exec 'code-server' \\\n  '--socket' \\\n  \"$ATRIUM_SESSION_SOCKET\""),
            "{s}"
        );
        assert!(s.contains("'--auth' \\\n  'password'"), "{s}");
        assert!(
            s.contains(
                "HASHED_PASSWORD=$(cat \"$ATRIUM_SESSION_DIR/token\")\nexport HASHED_PASSWORD\n"
            ),
            "{s}"
        );
        assert!(s.ends_with("\"$HOME\"\n"), "{s}");
        assert!(!s.contains("JUPYTER_TOKEN"), "{s}");
    }

    #[test]
    fn an_administrators_command_is_quoted_with_placeholders_as_variables() {
        let command = vec![
            "/opt/bin/server".to_string(),
            "--unix={socket}".to_string(),
            "it's".to_string(),
            "{base_url}x".to_string(),
            "{nope}{".to_string(),
        ];
        let s = script(&ScriptInput {
            app: &built_in("notebook"),
            listen: Listen::Socket,
            kernels: &[],
            command: Some(&command),
        });
        assert!(
            s.ends_with(
                "exec '/opt/bin/server' \\\n  '--unix='\"$ATRIUM_SESSION_SOCKET\" \\\n  'it'\\''s' \\\n  \"$ATRIUM_BASE_URL\"'x' \\\n  '{nope}{'\n"
            ),
            "{s}"
        );
        assert!(s.contains("export JUPYTER_TOKEN\n"), "{s}");
    }

    #[test]
    fn fields_reach_the_command_as_variables_never_as_text() {
        let s = local(
            &app(&["srv", "--cores={field.cores}", "{field.Bad}", "{socket}"]),
            &[],
        );
        assert!(
            s.ends_with(
                "exec 'srv' \\\n  '--cores='\"$ATRIUM_FIELD_CORES\" \\\n  '{field.Bad}' \\\n  \"$ATRIUM_SESSION_SOCKET\"\n"
            ),
            "{s}"
        );
        // A kernel name is an administrator's, quoted all the same.
        let s = local(&app(&["srv", "-k{kernel}"]), &["a'b".to_string()]);
        assert!(s.ends_with("exec 'srv' \\\n  '-k''a'\\''b'\n"), "{s}");
    }

    #[test]
    fn environment_names_the_socket_and_never_the_token() {
        let env = environment(Path::new("/run/s/7"), "/user/a/b/", Some("/home/a/tb"));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("ATRIUM_SESSION_SOCKET"), Some("/run/s/7/server.sock"));
        assert_eq!(
            get("JUPYTER_TOKEN"),
            None,
            "the job's environment is stored"
        );
        let s = local(&built_in("notebook"), &[]);
        assert!(
            s.contains(
                "JUPYTER_TOKEN=$(cat \"$ATRIUM_SESSION_DIR/token\")\nexport JUPYTER_TOKEN\n"
            ),
            "{s}"
        );
        assert_eq!(get("ATRIUM_LOGDIR"), Some("/home/a/tb"));
    }

    #[test]
    fn on_a_compute_node_jupyter_reads_its_token_file_and_names_its_port() {
        let s = on_node(&built_in("notebook"));
        assert!(s.contains("set -e\n"), "{s}");
        assert!(
            s.contains(
                "JUPYTER_TOKEN=$(cat \"$ATRIUM_SESSION_DIR/token\")\nexport JUPYTER_TOKEN\n"
            ),
            "{s}"
        );
        assert!(
            s.contains("s.bind((a, 0))\nprint(s.getsockname()[1])')\n"),
            "{s}"
        );
        assert!(
            s.contains("printf '{\"host\": \"%s\", \"port\": %s}\\n' \"$(hostname)\" \"$port\" >\"$ATRIUM_SESSION_DIR/connection.json.new\"\n"),
            "{s}"
        );
        assert!(
            s.contains("'--ip='\"$ATRIUM_SESSION_LISTEN\" \\\n  '--port='\"$port\" \\\n  '--port-retries=0'"),
            "{s}"
        );
        assert!(s.contains("export PYTHONPATH\n"), "{s}");
        assert!(!s.contains("--sock"), "{s}");
        assert!(
            s.contains("'--ServerApp.base_url='\"$ATRIUM_BASE_URL\""),
            "{s}"
        );
        let env = tcp_environment(
            Path::new("/home/a/.atrium/sessions/7"),
            "/user/a/b/",
            "0.0.0.0",
            None,
        );
        assert!(env
            .iter()
            .all(|(k, _)| k != "JUPYTER_TOKEN" && k != "ATRIUM_SESSION_SOCKET"));
        assert!(env.contains(&("ATRIUM_SESSION_LISTEN".into(), "0.0.0.0".into())));
    }

    #[test]
    fn on_a_compute_node_tensorboard_binds_and_names_its_port_itself() {
        let s = on_node(&built_in("tensorboard"));
        assert!(!s.contains("JUPYTER_TOKEN"), "{s}");
        assert!(!s.contains("port=$("), "{s}");
        assert!(
            s.contains(
                "'--listen' \\\n  \"$ATRIUM_SESSION_LISTEN\" \\\n  '--token-file' \\\n  \"$ATRIUM_SESSION_DIR/token\""
            ),
            "{s}"
        );
        assert!(
            s.contains("'--connection-file' \\\n  \"$ATRIUM_SESSION_DIR/connection.json\""),
            "{s}"
        );
    }
}
