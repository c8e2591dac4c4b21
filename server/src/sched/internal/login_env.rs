//! `--get-user-env`: the user's login environment, read by running their login
//! shell as them (`bash --login -c 'env -0'`, Slurm's `su - USER -c env`) through
//! the one way the portal acts as a user ([`crate::privilege::UserCommand`]), with
//! a time limit and the submission bounds on what it prints.
//! Must not touch: the cluster, the database.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::privilege::{system_program, Identity, UserCommand};
use crate::sched::submission::{MAX_ENV_BYTES, MAX_ENV_VARS};

/// Slurm's default time for the login shell.
pub const LOGIN_ENV_TIMEOUT: Duration = Duration::from_secs(8);

/// The variables `identity`'s login shell sets, at most [`MAX_ENV_VARS`] of at
/// most [`MAX_ENV_BYTES`] together; an error says why none could be read.
pub async fn login_environment(identity: &Identity) -> Result<BTreeMap<String, String>, String> {
    let command = UserCommand::new(identity, system_program("bash"))
        .args(["--login", "-c", "exec /usr/bin/env -0"])
        .current_dir(&identity.home);
    let read = async {
        let (mut child, stdin) = command
            .spawn(Stdio::piped(), Stdio::null())
            .await
            .map_err(|e| format!("cannot start the login shell: {e}"))?;
        drop(stdin);
        let mut out = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            stdout
                .take(MAX_ENV_BYTES as u64 + 1)
                .read_to_end(&mut out)
                .await
                .map_err(|e| format!("reading the login environment: {e}"))?;
        }
        let _ = child.kill().await;
        Ok::<_, String>(out)
    };
    let out = tokio::time::timeout(LOGIN_ENV_TIMEOUT, read)
        .await
        .map_err(|_| {
            format!(
                "the login shell did not answer within {} s",
                LOGIN_ENV_TIMEOUT.as_secs()
            )
        })??;
    if out.len() > MAX_ENV_BYTES {
        return Err(format!(
            "the login environment is over {MAX_ENV_BYTES} bytes"
        ));
    }
    Ok(parse(&out))
}

/// `NAME=value` entries separated by NUL; entries with names a shell could not
/// export are left out; at most [`MAX_ENV_VARS`].
fn parse(out: &[u8]) -> BTreeMap<String, String> {
    out.split(|b| *b == 0)
        .filter_map(|entry| {
            let text = std::str::from_utf8(entry).ok()?;
            let (k, v) = text.split_once('=')?;
            let valid = k
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            valid.then(|| (k.to_string(), v.to_string()))
        })
        .take(MAX_ENV_VARS)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn entries_are_split_on_nul_and_bad_names_left_out() {
        let env = super::parse(b"A=1\0PATH=/x:/y\0BASH_FUNC_f%%=() { :; }\0B=two\nlines\0junk\0");
        assert_eq!(
            env.into_iter().collect::<Vec<_>>(),
            [
                ("A".to_string(), "1".to_string()),
                ("B".to_string(), "two\nlines".to_string()),
                ("PATH".to_string(), "/x:/y".to_string())
            ]
        );
    }
}
