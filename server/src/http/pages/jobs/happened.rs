//! What became of an ended job, in words, first on its page: whose it is to fix (the
//! script's, or the site's: "tell your administrator"), what to do, and the last
//! lines the script printed.
//!
//! Owns: the wording of a job's end. Must not touch: anything with IO (it is pure:
//! the page passes the job and its output's tail), HTML (the template escapes it).

use crate::launch::{SETUP_FAILED, SITE_FAILURE};
use crate::services::jobs::JobInfo;

/// An ended job's story.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Happened {
    /// The cluster failed it, not the script: its owner can only tell the
    /// administrator (and resubmit once fixed).
    pub site: bool,
    /// One sentence: what happened.
    pub headline: String,
    /// What to do about it.
    pub advice: String,
    /// The last lines of its output, where they say why.
    pub last_lines: Option<String>,
}

/// How many lines of output the story quotes.
const LAST_LINES: usize = 8;

/// Who cancelled a job, when it was an administrator: their name and the reason
/// they gave (possibly empty).
pub struct CancelledBy {
    pub admin: String,
    pub reason: String,
}

/// The cluster's own failure to run `job` (a folder it binds missing on the node, the
/// node failing), not its script's: the message that says what failed. The one
/// test of it, for a job's page and the administrators' overview.
pub fn site_failure(job: &JobInfo) -> Option<&str> {
    let message = job.message.as_deref()?;
    let site = job.state == "NODE_FAIL"
        || (job.state == "FAILED"
            && job.exit_code == Some(i64::from(SETUP_FAILED))
            && message.starts_with(SITE_FAILURE));
    site.then_some(message)
}

/// What happened to `job` (nothing for a job that has not ended or that completed);
/// `output` is the end of what it printed.
pub fn happened(
    job: &JobInfo,
    output: Option<&str>,
    cancelled_by: Option<&CancelledBy>,
) -> Option<Happened> {
    let ran = crate::http::pages::when::span(job.time_used);
    let last = || last_lines(output?);
    let limit = || {
        job.time_limit.map_or("its time limit".to_string(), |s| {
            format!("its time limit of {}", crate::http::pages::when::span(s))
        })
    };
    let story = match job.state.as_str() {
        "FAILED" | "NODE_FAIL" => {
            let setup = job.message.as_deref().filter(|_| {
                job.exit_code == Some(i64::from(SETUP_FAILED)) || job.state == "NODE_FAIL"
            });
            match setup {
                Some(m) if site_failure(job).is_some() => Happened {
                    site: true,
                    headline: format!(
                        "The cluster could not run this job: {}.",
                        sentence(
                            m.strip_prefix(SITE_FAILURE.trim_end_matches("the folder "))
                                .unwrap_or(m)
                        )
                    ),
                    advice: format!(
                        "This is not a fault of your script. Tell your administrator (job {}); \
                         resubmit it once it is fixed.",
                        job.id
                    ),
                    last_lines: None,
                },
                Some(m) => Happened {
                    site: false,
                    headline: format!("The job could not start: {}.", sentence(m)),
                    advice: "Check the working directory and output paths it names, then resubmit."
                        .into(),
                    last_lines: None,
                },
                None => Happened {
                    site: false,
                    headline: match (job.exit_code, job.signal) {
                        (_, Some(sig)) if sig != 0 => format!(
                            "Your script was ended by signal {} after {ran}.",
                            scheduler::parse::signal_name(sig as i32)
                        ),
                        (Some(code), _) => format!("Your script exited with {code} after {ran}."),
                        _ => format!("Your script failed after {ran}."),
                    },
                    advice:
                        "Its last lines below usually say why; the whole output is under Output."
                            .into(),
                    last_lines: last(),
                },
            }
        }
        "TIMEOUT" => Happened {
            site: false,
            headline: format!("It reached {} and was stopped.", limit()),
            advice: "Ask for more time (Time limit, or #SBATCH --time=4h), or have it save its \
                     progress and resume from there."
                .into(),
            last_lines: last(),
        },
        "OUT_OF_MEMORY" => Happened {
            site: false,
            headline: format!(
                "It used more memory than {} and was stopped after {ran}.",
                job.memory_mb
                    .map_or("it was given".to_string(), |mb| format!(
                        "the {} it was given",
                        crate::services::gpu_map::memory_text(mb)
                    ))
            ),
            advice: "Ask for more memory (#SBATCH --mem=32G) or make it use less.".into(),
            last_lines: last(),
        },
        "CANCELLED" => {
            let by = cancelled_by.map_or(String::new(), |c| {
                format!(" by the administrator {}", c.admin)
            });
            Happened {
                site: false,
                headline: if job.start_time.is_some() {
                    format!("It was cancelled{by} after {ran}.")
                } else {
                    format!("It was cancelled{by} before it started.")
                },
                advice: match cancelled_by {
                    Some(c) if !c.reason.is_empty() => format!("Their reason: {}", c.reason),
                    _ => job
                        .message
                        .as_deref()
                        .map_or(String::new(), |m| format!("{}.", sentence(m))),
                },
                last_lines: None,
            }
        }
        _ => return None,
    };
    Some(story)
}

/// The text as the middle of a sentence: no final full stop.
fn sentence(text: &str) -> &str {
    text.trim().trim_end_matches('.')
}

/// The last lines of `text` that say something.
fn last_lines(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    (!lines.is_empty()).then(|| lines[lines.len().saturating_sub(LAST_LINES)..].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: &str) -> JobInfo {
        JobInfo {
            id: "7".into(),
            state: state.into(),
            time_used: 95,
            start_time: Some("2026-01-01T00:00:00Z".into()),
            ..JobInfo::default()
        }
    }

    #[test]
    fn a_missing_mount_is_the_sites_failure_and_an_exit_is_the_scripts() {
        let mut site = job("FAILED");
        site.exit_code = Some(i64::from(SETUP_FAILED));
        site.message = Some(format!(
            "{SITE_FAILURE}/srv/datasets (bound at /datasets) does not exist"
        ));
        let h = happened(&site, Some("bwrap: noise\n"), None).expect("a story");
        assert!(h.site);
        assert_eq!(
            h.headline,
            "The cluster could not run this job: the folder /srv/datasets (bound at /datasets) does not exist."
        );
        assert!(
            h.advice.contains("Tell your administrator (job 7)"),
            "{}",
            h.advice
        );
        assert_eq!(h.last_lines, None);

        let mut mine = job("FAILED");
        mine.exit_code = Some(3);
        let out: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        let h = happened(&mine, Some(&out), None).expect("a story");
        assert!(!h.site);
        assert_eq!(h.headline, "Your script exited with 3 after 2 min.");
        assert_eq!(
            h.last_lines.as_deref(),
            Some("line 5\nline 6\nline 7\nline 8\nline 9\nline 10\nline 11\nline 12")
        );
        // 121 from the script itself, with no message: the script's.
        mine.exit_code = Some(121);
        assert!(!happened(&mine, None, None).expect("story").site);
    }

    #[test]
    fn limits_say_what_to_ask_for_and_a_completed_job_needs_no_story() {
        let mut t = job("TIMEOUT");
        t.time_limit = Some(7200);
        let h = happened(&t, None, None).expect("story");
        assert_eq!(
            h.headline,
            "It reached its time limit of 2 h and was stopped."
        );
        let mut m = job("OUT_OF_MEMORY");
        m.memory_mb = Some(2048);
        assert!(happened(&m, None, None)
            .expect("story")
            .headline
            .contains("the 2 GiB it was given"));
        assert_eq!(happened(&job("COMPLETED"), Some("done"), None), None);
        assert_eq!(happened(&job("RUNNING"), None, None), None);
        let mut c = job("CANCELLED");
        c.start_time = None;
        assert_eq!(
            happened(&c, None, None).expect("story").headline,
            "It was cancelled before it started."
        );
        let by = CancelledBy {
            admin: "root".into(),
            reason: "node maintenance".into(),
        };
        let h = happened(&c, None, Some(&by)).expect("story");
        assert_eq!(
            h.headline,
            "It was cancelled by the administrator root before it started."
        );
        assert_eq!(h.advice, "Their reason: node maintenance");
    }
}
