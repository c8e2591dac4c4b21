//! The batch script that runs a session's server, and the environment it reads.
//! User-given values (the session name, the log folder) reach the script only through
//! environment variables, quoted where they are used: nothing a user types is ever
//! interpolated into shell text. Pure functions, tested with exact output.
//! Must not touch: processes, the database or the scheduler.

use std::path::Path;

use super::Kind;

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
    pub kind: Kind,
    pub listen: Listen,
    /// Kernelspecs JupyterLab may offer; empty: all installed.
    pub kernels: &'a [String],
    /// The environment's own server command (`{socket}`, `{base_url}`, `{logdir}`).
    pub command: Option<&'a [String]>,
}

/// Single-quote `s` for `sh`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script's text.
pub fn script(input: &ScriptInput<'_>) -> String {
    let mut out = String::from("#!/bin/sh\n");
    if input.listen == Listen::Tcp {
        out.push_str(&tcp_prelude(input.kind));
        out.push_str(&tcp_server(input));
        return out;
    }
    out.push_str(&format!(
        "# atrium {} session: its server listens on $ATRIUM_SESSION_SOCKET.\n",
        input.kind.as_str()
    ));
    // The token from its file, never from the job's environment (which is stored).
    out.push_str(&format!(
        "JUPYTER_TOKEN=$(cat \"$ATRIUM_SESSION_DIR/{TOKEN_FILE}\")\nexport JUPYTER_TOKEN\n"
    ));
    if let Some(command) = input.command {
        let words: Vec<String> = command.iter().map(|w| placeholders(w)).collect();
        out.push_str(&format!("exec {}\n", words.join(" ")));
        return out;
    }
    match input.kind {
        Kind::Notebook | Kind::Terminal => {
            out.push_str("exec jupyter lab --no-browser \\\n");
            out.push_str("  --sock=\"$ATRIUM_SESSION_SOCKET\" --sock-mode=0600 \\\n");
            jupyter_options(&mut out, input.kernels);
        }
        Kind::Tensorboard => {
            out.push_str(&format!(
                "exec python3 \"$ATRIUM_SESSION_DIR/{TENSORBOARD_LAUNCHER}\" \\\n"
            ));
            out.push_str("  --sock \"$ATRIUM_SESSION_SOCKET\" --logdir \"$ATRIUM_LOGDIR\" \\\n");
            out.push_str("  --path_prefix \"${ATRIUM_BASE_URL%/}\"\n");
        }
    }
    out
}

/// JupyterLab's options after where it listens.
fn jupyter_options(out: &mut String, kernels: &[String]) {
    out.push_str("  --ServerApp.base_url=\"$ATRIUM_BASE_URL\" \\\n");
    // Requests come through the portal under its own host name.
    out.push_str("  --ServerApp.allow_remote_access=True \\\n");
    // JupyterLab's hub mode: the page gets no token, and File > Hub Control
    // Panel leads back to the portal (`/hub/…` redirects there).
    out.push_str("  --ServerApp.tornado_settings=hub_prefix=/hub/ \\\n");
    out.push_str("  --ServerApp.tornado_settings=hub_host= \\\n");
    out.push_str("  --ServerApp.tornado_settings=user=\"$USER\" \\\n");
    out.push_str("  --ServerApp.root_dir=\"$HOME\" \\\n");
    out.push_str("  --ServerApp.terminals_enabled=True \\\n");
    out.push_str("  --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \\\n");
    out.push_str("  --LabApp.news_url=None");
    for k in kernels {
        out.push_str(&format!(
            " \\\n  --KernelSpecManager.allowed_kernelspecs={}",
            sh_quote(k)
        ));
    }
    out.push('\n');
}

/// The start of a script on a compute node: the token is read from its file (never
/// from the job's environment, which Slurm keeps and shows to administrators).
fn tcp_prelude(kind: Kind) -> String {
    let mut out = format!(
        "# atrium {} session on a compute node: its server listens on a free TCP port of\n\
         # $ATRIUM_SESSION_LISTEN, named in $ATRIUM_SESSION_DIR/{CONNECTION_FILE}.\n\
         set -e\n",
        kind.as_str()
    );
    if kind != Kind::Tensorboard {
        out.push_str(&format!(
            "JUPYTER_TOKEN=$(cat \"$ATRIUM_SESSION_DIR/{TOKEN_FILE}\")\n\
             export JUPYTER_TOKEN\n\
             port=$(python3 -c 'import os, socket\n\
             a = os.environ[\"ATRIUM_SESSION_LISTEN\"]\n\
             s = socket.socket(socket.AF_INET6 if \":\" in a else socket.AF_INET)\n\
             s.bind((a, 0))\n\
             print(s.getsockname()[1])')\n\
             printf '{{\"host\": \"%s\", \"port\": %s}}\\n' \"$(hostname)\" \"$port\" \
             >\"$ATRIUM_SESSION_DIR/{CONNECTION_FILE}.new\"\n\
             mv -f \"$ATRIUM_SESSION_DIR/{CONNECTION_FILE}.new\" \"$ATRIUM_SESSION_DIR/{CONNECTION_FILE}\"\n"
        ));
    }
    out
}

/// The server of a session on a compute node.
fn tcp_server(input: &ScriptInput<'_>) -> String {
    let mut out = String::new();
    match input.kind {
        Kind::Notebook | Kind::Terminal => {
            // The proof extension answers the portal's challenge with the token.
            out.push_str(
                "PYTHONPATH=\"$ATRIUM_SESSION_DIR${PYTHONPATH:+:$PYTHONPATH}\"\nexport PYTHONPATH\n",
            );
            out.push_str("exec jupyter lab --no-browser \\\n");
            out.push_str(
                "  --ip=\"$ATRIUM_SESSION_LISTEN\" --port=\"$port\" --port-retries=0 \\\n",
            );
            out.push_str("  --ServerApp.jpserver_extensions atrium_proof=True \\\n");
            jupyter_options(&mut out, input.kernels);
        }
        // The launcher binds the port itself, writes the connection file once it
        // listens, and answers only requests that carry the token.
        Kind::Tensorboard => {
            out.push_str(&format!(
                "exec python3 \"$ATRIUM_SESSION_DIR/{TENSORBOARD_LAUNCHER}\" \\\n"
            ));
            out.push_str(&format!(
                "  --listen \"$ATRIUM_SESSION_LISTEN\" --token-file \"$ATRIUM_SESSION_DIR/{TOKEN_FILE}\" \\\n"
            ));
            out.push_str(&format!(
                "  --connection-file \"$ATRIUM_SESSION_DIR/{CONNECTION_FILE}\" --logdir \"$ATRIUM_LOGDIR\" \\\n"
            ));
            out.push_str("  --path_prefix \"${ATRIUM_BASE_URL%/}\"\n");
        }
    }
    out
}

/// An administrator's command word, single-quoted, with its placeholders turned into
/// the variables that hold them.
fn placeholders(word: &str) -> String {
    let mut out = String::new();
    let mut rest = word;
    let mut literal = String::new();
    let flush = |literal: &mut String, out: &mut String| {
        if !literal.is_empty() {
            out.push_str(&sh_quote(literal));
            literal.clear();
        }
    };
    while !rest.is_empty() {
        let found = [
            ("{socket}", "\"$ATRIUM_SESSION_SOCKET\""),
            ("{base_url}", "\"$ATRIUM_BASE_URL\""),
            ("{logdir}", "\"$ATRIUM_LOGDIR\""),
        ]
        .into_iter()
        .find(|(p, _)| rest.starts_with(p));
        match found {
            Some((p, var)) => {
                flush(&mut literal, &mut out);
                out.push_str(var);
                rest = &rest[p.len()..];
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
        let s = script(&ScriptInput {
            kind: Kind::Notebook,
            listen: Listen::Socket,
            kernels: &kernels,
            command: None,
        });
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("exec jupyter lab --no-browser"));
        assert!(s.contains("--sock=\"$ATRIUM_SESSION_SOCKET\" --sock-mode=0600"));
        assert!(s.contains("--ServerApp.base_url=\"$ATRIUM_BASE_URL\""));
        assert!(
            s.contains("--ServerApp.tornado_settings=hub_prefix=/hub/"),
            "{s}"
        );
        assert!(s.contains("--KernelSpecManager.allowed_kernelspecs='python3'"));
        assert!(s.contains("--KernelSpecManager.allowed_kernelspecs='ir'"));
    }

    #[test]
    fn tensorboard_reads_its_folder_from_the_environment() {
        let s = script(&ScriptInput {
            kind: Kind::Tensorboard,
            listen: Listen::Socket,
            kernels: &[],
            command: None,
        });
        assert!(s.contains("--logdir \"$ATRIUM_LOGDIR\""), "{s}");
        assert!(s.contains("--path_prefix \"${ATRIUM_BASE_URL%/}\""), "{s}");
    }

    #[test]
    fn an_administrators_command_is_quoted_with_placeholders_as_variables() {
        let command = vec![
            "/opt/bin/server".to_string(),
            "--unix={socket}".to_string(),
            "it's".to_string(),
            "{base_url}x".to_string(),
        ];
        let s = script(&ScriptInput {
            kind: Kind::Notebook,
            listen: Listen::Socket,
            kernels: &[],
            command: Some(&command),
        });
        assert!(
            s.ends_with(
                "exec '/opt/bin/server' '--unix='\"$ATRIUM_SESSION_SOCKET\" 'it'\\''s' \"$ATRIUM_BASE_URL\"'x'\n"
            ),
            "{s}"
        );
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
        let s = script(&ScriptInput {
            kind: Kind::Notebook,
            listen: Listen::Socket,
            kernels: &[],
            command: None,
        });
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
        let s = script(&ScriptInput {
            kind: Kind::Notebook,
            listen: Listen::Tcp,
            kernels: &[],
            command: None,
        });
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
            s.contains("--ip=\"$ATRIUM_SESSION_LISTEN\" --port=\"$port\" --port-retries=0"),
            "{s}"
        );
        assert!(!s.contains("--sock"), "{s}");
        assert!(
            s.contains("--ServerApp.base_url=\"$ATRIUM_BASE_URL\""),
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
        let s = script(&ScriptInput {
            kind: Kind::Tensorboard,
            listen: Listen::Tcp,
            kernels: &[],
            command: None,
        });
        assert!(!s.contains("JUPYTER_TOKEN"), "{s}");
        assert!(
            s.contains(
                "--listen \"$ATRIUM_SESSION_LISTEN\" --token-file \"$ATRIUM_SESSION_DIR/token\""
            ),
            "{s}"
        );
        assert!(
            s.contains("--connection-file \"$ATRIUM_SESSION_DIR/connection.json\""),
            "{s}"
        );
    }
}
