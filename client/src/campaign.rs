//! `atrium campaign`: benchmark campaigns from the command line, through
//! `/api/v1/campaigns`: the templates, a campaign's estimate and submission (a matrix
//! of GPU counts and template parameters, with repetitions), the list, a campaign's
//! progress and report, and its HTML or CSV export.
//!
//! ```text
//! atrium campaign templates
//! atrium campaign submit resnet50-synthetic --gpus 1,2 --param PRECISION=fp16,fp32 \
//!     --param BATCH=64,128 --repeat 3 [--name TEXT] [--script FILE] [--dry-run]
//! atrium campaign list
//! atrium campaign show ID
//! atrium campaign export ID --html|--csv [-o FILE]
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::{connect, failed, print_lines, split_list, SlurmError};

const CMD: &str = "campaign";

#[derive(Debug, Clone, Args)]
pub struct CampaignArgs {
    #[command(subcommand)]
    pub command: CampaignCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum CampaignCommand {
    /// The built-in templates and their parameters.
    Templates,
    /// Submit a campaign (or, with --dry-run, show what it would submit).
    Submit(SubmitArgs),
    /// Your campaigns (everyone's for an administrator).
    List,
    /// A campaign's progress and report.
    Show { id: i64 },
    /// A campaign's report as one HTML file or CSV.
    Export(ExportArgs),
}

#[derive(Debug, Clone, Args)]
pub struct SubmitArgs {
    /// A built-in template (`atrium campaign templates`), or the name of --script.
    pub template: String,
    /// GPU counts, comma-separated (`1,2,4`).
    #[arg(long)]
    pub gpus: Option<String>,
    /// A template parameter's values: `NAME=v1,v2` (repeat for each parameter).
    #[arg(long = "param", value_name = "NAME=VALUES")]
    pub params: Vec<String>,
    /// Runs of each point (1 to 10).
    #[arg(long = "repeat", default_value_t = 1)]
    pub repetitions: u32,
    /// What the campaign is called.
    #[arg(long)]
    pub name: Option<String>,
    /// Your own template: a job script with `#CAMPAIGN --param NAME=DEFAULT` lines.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Show the points, jobs and GPU-hours it would take; submit nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    pub id: i64,
    /// One self-contained HTML file (the default).
    #[arg(long, conflicts_with = "csv")]
    pub html: bool,
    /// CSV, one row per point.
    #[arg(long)]
    pub csv: bool,
    /// Write here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// The request body of `args`; a bad argument names itself.
pub fn body(args: &SubmitArgs) -> Result<Value, SlurmError> {
    let mut params: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in &args.params {
        let Some((name, values)) = p.split_once('=') else {
            return Err(SlurmError::new(
                CMD,
                format!("--param {p:?}: write it as NAME=VALUE[,VALUE…]"),
            ));
        };
        params
            .entry(name.trim().to_string())
            .or_default()
            .extend(split_list(values));
    }
    let gpus = match &args.gpus {
        Some(list) => split_list(list)
            .iter()
            .map(|g| {
                g.parse::<u32>().map_err(|_| {
                    SlurmError::new(CMD, format!("--gpus: {g:?} is not a whole number"))
                })
            })
            .collect::<Result<Vec<u32>, _>>()?,
        None => Vec::new(),
    };
    let mut body = json!({
        "template": args.template,
        "matrix": {"gpus": gpus, "params": params, "repetitions": args.repetitions},
        // As sbatch does, the jobs get the submitting shell's environment.
        "environment": super::sbatch::job_environment(std::env::vars_os()),
    });
    if let Some(name) = &args.name {
        body["name"] = json!(name);
    }
    if let Some(path) = &args.script {
        let script = std::fs::read_to_string(path)
            .map_err(|e| SlurmError::new(CMD, format!("--script {}: {e}", path.display())))?;
        body["script"] = json!(script);
    }
    Ok(body)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A number with `digits` decimals, or `-`.
fn number(v: &Value, digits: usize) -> String {
    v.as_f64()
        .map_or_else(|| "-".to_string(), |n| format!("{n:.digits$}"))
}

/// The lines `atrium campaign show` prints of a campaign's JSON.
pub fn report_lines(c: &Value) -> Vec<String> {
    let r = &c["report"];
    let p = &r["progress"];
    let mut out = vec![
        format!(
            "Campaign {}: {} ({}), by {}",
            text(&c["id"]),
            text(&c["name"]),
            text(&c["template"]),
            text(&c["user"])
        ),
        format!(
            "Jobs: {} planned, {} done, {} failed, {} running or waiting; {} runs recorded",
            text(&p["planned"]),
            text(&p["done"]),
            text(&p["failed"]),
            text(&p["running_or_pending"]),
            text(&p["recorded"])
        ),
    ];
    let unit = text(&r["unit"]);
    out.push(format!(
        "{:<44} {:>12} {:>8} {:>12} {:>10}  {}",
        "point",
        format!("median {unit}"),
        "spread",
        "per GPU",
        "vs before",
        "closest published"
    ));
    for point in r["points"].as_array().into_iter().flatten() {
        let spread = match point["spread_percent"].as_f64() {
            Some(s) if point["unsteady"] == true => format!("{s:.1}% !"),
            Some(s) => format!("{s:.1}%"),
            None => "-".into(),
        };
        let before = match point["previous"]["change_percent"].as_f64() {
            Some(c) if point["previous"]["slower"] == true => format!("{c:+.1}% SLOWER"),
            Some(c) => format!("{c:+.1}%"),
            None => "-".into(),
        };
        let closest = match point["closest"].as_object() {
            Some(cl) => format!(
                "{} × {}",
                number(cl.get("ratio").unwrap_or(&Value::Null), 2),
                text(cl.get("source").unwrap_or(&Value::Null))
            ),
            None => "-".into(),
        };
        out.push(format!(
            "{:<44} {:>12} {:>8} {:>12} {:>10}  {}",
            text(&point["key"]),
            number(&point["median"], 1),
            spread,
            number(&point["per_gpu"], 1),
            before,
            closest
        ));
    }
    if let Some(s) = r["sizing"].as_object() {
        out.push(format!(
            "Storage: {} MB/s per GPU measured ({}); one node {} MB/s ({})",
            number(s.get("mb_per_s_per_gpu").unwrap_or(&Value::Null), 1),
            text(s.get("from_point").unwrap_or(&Value::Null)),
            number(s.get("node_mb_per_s").unwrap_or(&Value::Null), 0),
            text(s.get("node_from").unwrap_or(&Value::Null))
        ));
        for need in s
            .get("needs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push(format!(
                "  {} GPUs need {} MB/s: {} nodes",
                text(&need["gpus"]),
                number(&need["demand_mb_per_s"], 0),
                text(&need["nodes"]["nodes_to_provision"])
            ));
        }
    }
    if r["slower"].as_u64().unwrap_or(0) > 0 {
        out.push(format!(
            "{} points are more than 5% slower than in the previous campaign",
            text(&r["slower"])
        ));
    }
    out
}

pub async fn run(args: CampaignArgs) -> anyhow::Result<()> {
    let portal = connect(CMD)?;
    match args.command {
        CampaignCommand::Templates => {
            let list = portal
                .get_json("/campaigns/templates")
                .await
                .map_err(failed(CMD))?;
            let mut lines = Vec::new();
            for t in list["templates"].as_array().into_iter().flatten() {
                lines.push(format!("{}: {}", text(&t["name"]), text(&t["title"])));
                for p in t["params"].as_array().into_iter().flatten() {
                    lines.push(format!("    {}={}", text(&p["name"]), text(&p["default"])));
                }
            }
            print_lines(lines)?;
        }
        CampaignCommand::Submit(submit) => {
            let body = body(&submit)?;
            if submit.dry_run {
                let e = portal
                    .post_json("/campaigns/estimate", &body)
                    .await
                    .map_err(failed(CMD))?;
                print_lines([
                    format!(
                        "{} points × {} repetitions: {} jobs in {} arrays",
                        text(&e["points"]),
                        text(&e["repetitions"]),
                        text(&e["jobs"]),
                        text(&e["arrays"])
                    ),
                    format!(
                        "GPU-hours: at most {} (every job to its time limit); expected {}",
                        number(&e["gpu_hours"]["limit"], 1),
                        number(&e["gpu_hours"]["expected"], 1)
                    ),
                ])?;
            } else {
                let c = portal
                    .post_json("/campaigns", &body)
                    .await
                    .map_err(failed(CMD))?;
                let jobs: Vec<String> = c["jobs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect();
                print_lines([format!(
                    "Submitted campaign {} ({} jobs in arrays {})",
                    text(&c["id"]),
                    text(&c["tasks"]),
                    jobs.join(", ")
                )])?;
            }
        }
        CampaignCommand::List => {
            let list = portal.get_json("/campaigns").await.map_err(failed(CMD))?;
            let mut lines = vec![format!(
                "{:>6} {:<20} {:<12} {:>6}  {}",
                "ID", "TEMPLATE", "USER", "JOBS", "NAME"
            )];
            for c in list["campaigns"].as_array().into_iter().flatten() {
                lines.push(format!(
                    "{:>6} {:<20} {:<12} {:>6}  {}",
                    text(&c["id"]),
                    text(&c["template"]),
                    text(&c["user"]),
                    text(&c["tasks"]),
                    text(&c["name"])
                ));
            }
            print_lines(lines)?;
        }
        CampaignCommand::Show { id } => {
            let c = portal
                .get_json(&format!("/campaigns/{id}"))
                .await
                .map_err(not_found(id))?;
            print_lines(report_lines(&c))?;
        }
        CampaignCommand::Export(export) => {
            let kind = if export.csv { "csv" } else { "html" };
            let bytes = portal
                .get_bytes(&format!("/campaigns/{}/report.{kind}", export.id))
                .await
                .map_err(not_found(export.id))?;
            match &export.output {
                Some(path) => std::fs::write(path, &bytes)
                    .map_err(|e| SlurmError::new(CMD, format!("-o {}: {e}", path.display())))?,
                None => {
                    use std::io::Write;
                    std::io::stdout().write_all(&bytes)?;
                }
            }
        }
    }
    Ok(())
}

fn not_found(id: i64) -> impl Fn(super::CallError) -> SlurmError {
    move |e| {
        if e.status == Some(404) {
            SlurmError::new(CMD, format!("no campaign {id} of yours"))
        } else {
            SlurmError::new(CMD, e.message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(params: &[&str], gpus: Option<&str>) -> SubmitArgs {
        SubmitArgs {
            template: "resnet50-synthetic".into(),
            gpus: gpus.map(str::to_string),
            params: params.iter().map(|p| p.to_string()).collect(),
            repetitions: 3,
            name: None,
            script: None,
            dry_run: false,
        }
    }

    #[test]
    fn the_matrix_is_built_from_the_arguments() {
        let b = body(&args(
            &["PRECISION=fp16,fp32", "BATCH=64", "BATCH=128"],
            Some("1,2"),
        ))
        .expect("body");
        assert_eq!(b["matrix"]["gpus"], json!([1, 2]));
        assert_eq!(b["matrix"]["params"]["PRECISION"], json!(["fp16", "fp32"]));
        assert_eq!(b["matrix"]["params"]["BATCH"], json!(["64", "128"]));
        assert_eq!(b["matrix"]["repetitions"], 3);
        let e = body(&args(&["PRECISION"], None)).expect_err("no =");
        assert!(e.to_string().contains("--param \"PRECISION\""), "{e}");
        let e = body(&args(&[], Some("1,two"))).expect_err("not a number");
        assert!(e.to_string().contains("--gpus: \"two\""), "{e}");
    }

    #[test]
    fn a_report_prints_its_points_and_flags() {
        let c = json!({"id": 4, "name": "n", "template": "t", "user": "alice",
            "report": {"progress": {"planned": 2, "done": 2, "failed": 0, "running_or_pending": 0, "recorded": 2},
                "unit": "images/s", "slower": 1,
                "points": [{"key": "gpus=1,BATCH=64", "median": 100.0, "spread_percent": 7.5, "unsteady": true,
                    "per_gpu": 100.0, "previous": {"change_percent": -10.0, "slower": true},
                    "closest": {"ratio": 0.5, "source": "study"}}]}});
        let lines = report_lines(&c);
        assert!(lines[2].contains("median images/s"), "{lines:?}");
        assert!(lines[3].contains("7.5% !"), "{lines:?}");
        assert!(lines[3].contains("-10.0% SLOWER"), "{lines:?}");
        assert!(lines[3].contains("0.50 × study"), "{lines:?}");
        assert!(lines
            .last()
            .is_some_and(|l| l.contains("1 points are more than 5% slower")));
    }
}
