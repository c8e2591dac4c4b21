//! A submission whose request is built in code (a session's job), not parsed from
//! text: the typed request goes to the scheduler as it is, and only the Slurm
//! backend's `sbatch` arguments are printed from it (`slurm::sbatch`).
//! Must not touch: the scheduler state, the database or processes.

use std::collections::BTreeMap;
use std::path::Path;

use scheduler::parse::limits::{MAX_NAME_BYTES, PATH_MAX};
use scheduler::{JobRequest, SliceKind, TimeLimit};

use super::{check_environment, field, merge, Submission, SubmissionError, SubmissionLimits};

impl Submission {
    /// A submission of `script` with `request`, which overrides the script's own
    /// directives as options beside a script do. The script and the environment are
    /// bounded as [`super::build`] bounds them; the request's values are checked
    /// where no parser did: each error names the request's field.
    pub fn from_request(
        script: String,
        request: JobRequest,
        environment: BTreeMap<String, String>,
        submit_dir: Option<String>,
        limits: &SubmissionLimits,
    ) -> Result<Submission, SubmissionError> {
        if script.len() > limits.max_script_bytes {
            return Err(SubmissionError::Field {
                field: "script",
                message: format!(
                    "is {} bytes long; at most {} are allowed",
                    script.len(),
                    limits.max_script_bytes
                ),
            });
        }
        if script.trim().is_empty() {
            return Err(field("script", "is empty"));
        }
        if script.contains('\0') {
            return Err(field("script", "contains a NUL byte"));
        }
        check_environment(&environment)?;
        check_request(&request)?;
        if let Some(dir) = &submit_dir {
            if dir.len() > PATH_MAX || !Path::new(dir).is_absolute() {
                return Err(field(
                    "working_directory",
                    "must be an absolute path of at most PATH_MAX bytes",
                ));
            }
        }
        let request = merge(
            scheduler::parse_script_with(&script, &limits.parse)?,
            request,
        );
        Ok(Submission {
            options: Vec::new(),
            typed: true,
            script,
            request,
            environment,
            submit_dir,
            container: None,
            benchmark: None,
        })
    }
}

/// What the parser would have refused in the fields a typed request sets.
fn check_request(r: &JobRequest) -> Result<(), SubmissionError> {
    let text = |name: &'static str, v: &Option<String>, max: usize| match v {
        Some(v) if v.is_empty() || v.len() > max || v.chars().any(char::is_control) => {
            Err(SubmissionError::Field {
                field: name,
                message: format!(
                    "must be 1 to {max} bytes long, without control characters, got {v:?}"
                ),
            })
        }
        _ => Ok(()),
    };
    text("name", &r.name, MAX_NAME_BYTES)?;
    text("partition", &r.partition, MAX_NAME_BYTES)?;
    text("account", &r.account, MAX_NAME_BYTES)?;
    text("qos", &r.qos, MAX_NAME_BYTES)?;
    text("output", &r.output, PATH_MAX)?;
    text("error", &r.error, PATH_MAX)?;
    text("chdir", &r.chdir, PATH_MAX)?;
    if let Some(g) = &r.gpus {
        if !(1..=999_999).contains(&g.count) {
            return Err(field("gpus", "must be between 1 and 999999"));
        }
        if let SliceKind::Gpu { r#type: Some(t) } = &g.kind {
            let valid = !t.is_empty()
                && t.len() <= 64
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
            if !valid {
                return Err(SubmissionError::Field {
                    field: "gpus",
                    message: format!("{t:?} is not a GPU type or MIG profile"),
                });
            }
        }
    }
    if r.time_limit == Some(TimeLimit::Seconds(0)) {
        return Err(field("time", "must be more than 0 seconds"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler::{GpuPer, GpuRequest};

    fn session_request() -> JobRequest {
        JobRequest {
            name: Some("notebook:default".into()),
            partition: Some("gpu".into()),
            gpus: Some(GpuRequest {
                kind: SliceKind::Gpu {
                    r#type: Some("1g.10gb".into()),
                },
                count: 2,
                per: GpuPer::Node,
            }),
            time_limit: Some(TimeLimit::Seconds(5400)),
            output: Some("/spool/sessions/3/session.log".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_typed_request_goes_as_it_is_and_sbatch_gets_the_same() {
        let request = session_request();
        let sub = Submission::from_request(
            "#!/bin/sh\nexec jupyter lab\n".into(),
            request.clone(),
            BTreeMap::from([("ATRIUM_SESSION_DIR".into(), "/spool/sessions/3".into())]),
            Some("/home/alice".into()),
            &SubmissionLimits::default(),
        )
        .expect("submission");
        assert_eq!(sub.request, request);
        assert!(sub.typed);
        // What the Slurm backend gives sbatch for it.
        let options = crate::sched::slurm::sbatch::options(&sub.request);
        assert_eq!(
            scheduler::parse_args(&options).expect("sbatch options parse"),
            request
        );
        assert!(options.contains(&"--gres=gpu:1g.10gb:2".to_string()));
        assert!(options.contains(&"--time=01:30:00".to_string()));
    }

    #[test]
    fn errors_name_the_field() {
        let build = |request: JobRequest, env: BTreeMap<String, String>| {
            Submission::from_request(
                "#!/bin/sh\ntrue\n".into(),
                request,
                env,
                None,
                &SubmissionLimits::default(),
            )
            .map(drop)
            .map_err(|e| e.field())
        };
        let mut r = session_request();
        if let Some(g) = r.gpus.as_mut() {
            g.kind = SliceKind::Gpu {
                r#type: Some("a;b".into()),
            };
        }
        assert_eq!(build(r, BTreeMap::new()), Err("gpus"));
        let mut r = session_request();
        r.partition = Some("bad\npartition".into());
        assert_eq!(build(r, BTreeMap::new()), Err("partition"));
        let mut r = session_request();
        r.time_limit = Some(TimeLimit::Seconds(0));
        assert_eq!(build(r, BTreeMap::new()), Err("time"));
        assert_eq!(
            build(
                session_request(),
                BTreeMap::from([("1BAD".into(), "x".into())])
            ),
            Err("environment")
        );
        assert_eq!(build(session_request(), BTreeMap::new()), Ok(()));
    }
}
