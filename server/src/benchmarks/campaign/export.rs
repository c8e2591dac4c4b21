//! A campaign's report as CSV (one row per point) and as one self-contained HTML
//! document (inline style and SVG charts, no script, no link to anything), rendered
//! by askama from `templates/web/benchmarks/campaign_report.html` so that every text
//! is escaped. Figures are rounded here, for display. Must not touch: where the
//! report comes from, HTTP.

use askama::Template;

use super::super::sizing::figure;
use super::report::{PointReport, Progress, Report};
use super::svg::{bars, lines, Bars, Lines};
use crate::domain::numbers::plural;

/// A number for the CSV: at most three decimals, none when whole; empty when absent.
fn number(value: Option<f64>) -> String {
    let Some(v) = value.filter(|v| v.is_finite()) else {
        return String::new();
    };
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A text field of the CSV: quoted when it holds `,`, `"` or a line break (`"`
/// doubled), and with a `'` before a leading `=`, `+`, `-`, `@`, tab or carriage
/// return, which a spreadsheet would read as a formula.
fn text(value: &str) -> String {
    let value = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_string()
    };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

/// The parameters' names, as the points have them.
fn param_names(report: &Report) -> Vec<String> {
    report
        .points
        .first()
        .map(|p| p.params.keys().cloned().collect())
        .unwrap_or_default()
}

/// A point's flags: `unsteady`, `slower`.
fn flags(p: &PointReport) -> Vec<&'static str> {
    let mut out = Vec::new();
    if p.unsteady {
        out.push("unsteady");
    }
    if p.previous.is_some_and(|c| c.slower) {
        out.push("slower");
    }
    out
}

/// The report as CSV: a header, then one row per point.
pub fn csv(report: &Report) -> String {
    let params = param_names(report);
    let mut header: Vec<String> = vec!["point".into(), "key".into()];
    header.extend(params.iter().map(|p| text(p)));
    header.extend(
        [
            "gpus",
            "metric",
            "unit",
            "median",
            "min",
            "max",
            "spread_percent",
            "repetitions",
            "per_gpu",
            "reference_source",
            "reference_value",
            "reference_ratio",
            "reference_per_gpu",
            "reference_why",
            "read_mb_per_s_per_gpu",
            "read_source",
            "previous_median",
            "change_percent",
            "flags",
        ]
        .map(String::from),
    );
    let mut out = header.join(",");
    out.push_str("\r\n");
    let metric = report.metric.as_deref().unwrap_or("");
    let unit = report.unit.as_deref().unwrap_or("");
    for p in &report.points {
        let mut row = vec![p.index.to_string(), text(&p.key)];
        row.extend(
            params
                .iter()
                .map(|name| text(p.params.get(name).map_or("", String::as_str))),
        );
        let closest = p.closest.as_ref();
        let storage = p.storage.as_ref();
        row.extend([
            p.gpus.to_string(),
            text(metric),
            text(unit),
            number(p.median),
            number(p.min),
            number(p.max),
            number(p.spread_percent),
            p.values.len().to_string(),
            number(p.per_gpu),
            text(closest.map_or("", |c| c.source.as_str())),
            number(closest.map(|c| c.value)),
            number(closest.map(|c| c.ratio)),
            closest.map_or(String::new(), |c| c.per_gpu.to_string()),
            text(closest.map_or("", |c| c.why.as_str())),
            number(storage.and_then(|s| s.mb_per_s_per_gpu)),
            text(storage.map_or("", |s| s.source.as_str())),
            number(p.previous.map(|c| c.before)),
            number(p.previous.map(|c| c.change_percent)),
            flags(p).join(" "),
        ]);
        out.push_str(&row.join(","));
        out.push_str("\r\n");
    }
    out
}

/// Each point's name in the charts: its GPUs and the parameters that differ between
/// points (`2 GPUs · BATCH=64`).
fn labels(report: &Report) -> Vec<String> {
    let varying: Vec<String> = param_names(report)
        .into_iter()
        .filter(|name| {
            let mut values = report.points.iter().map(|p| p.params.get(name));
            let first = values.next().flatten();
            values.any(|v| v != first)
        })
        .collect();
    report
        .points
        .iter()
        .map(|p| {
            let mut label = plural(u64::from(p.gpus), "GPU", "GPUs");
            for name in &varying {
                if let Some(v) = p.params.get(name) {
                    label.push_str(&format!(" · {name}={v}"));
                }
            }
            label
        })
        .collect()
}

/// A point's row on the page, every figure written.
struct Row {
    index: u32,
    params: Vec<String>,
    gpus: u32,
    repetitions: usize,
    median: String,
    range: String,
    spread: String,
    note: Option<String>,
    per_gpu: String,
    reference: Option<Reference>,
    storage: String,
    previous: String,
    flags: Vec<&'static str>,
}

/// A point's closest published figure, written.
struct Reference {
    source: String,
    value: String,
    ratio: String,
    why: String,
}

/// A row of the sizing table.
struct Need {
    gpus: u32,
    demand: String,
    nodes: String,
    published: String,
}

/// The sizing section, written.
struct SizingView {
    per_gpu: String,
    from_point: String,
    node: String,
    rule: Option<String>,
    needs: Vec<Need>,
}

/// One GPU count of a scaling series, written.
struct ScalingRow {
    series: String,
    gpus: u32,
    value: String,
    ideal: String,
    efficiency: String,
}

#[derive(Template)]
#[template(path = "benchmarks/campaign_report.html")]
struct ReportPage<'a> {
    title: &'a str,
    generated_at: &'a str,
    metric: String,
    progress: Progress,
    unsteady: usize,
    slower: usize,
    /// Whether a previous campaign was compared with.
    compared: bool,
    params: Vec<String>,
    rows: Vec<Row>,
    bars: Option<Bars>,
    lines: Option<Lines>,
    scaling: Vec<ScalingRow>,
    sizing: Option<SizingView>,
}

fn percent(value: f64) -> String {
    format!("{value:.1} %")
}

fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "—".to_string())
}

fn row(p: &PointReport, params: &[String]) -> Row {
    Row {
        index: p.index,
        params: params
            .iter()
            .map(|n| p.params.get(n).cloned().unwrap_or_default())
            .collect(),
        gpus: p.gpus,
        repetitions: p.values.len(),
        median: or_dash(p.median.map(figure)),
        range: match (p.min, p.max) {
            (Some(lo), Some(hi)) => format!("{} – {}", figure(lo), figure(hi)),
            _ => "—".to_string(),
        },
        spread: or_dash(p.spread_percent.map(percent)),
        note: p.spread_note(),
        per_gpu: or_dash(p.per_gpu.map(figure)),
        reference: p.closest.as_ref().map(|c| Reference {
            source: c.source.clone(),
            value: if c.per_gpu {
                format!(
                    "{} on {} ({} scaled to this point's GPUs)",
                    figure(c.value),
                    plural(u64::try_from(c.gpus).unwrap_or(0), "GPU", "GPUs"),
                    figure(c.compared_value)
                )
            } else {
                figure(c.value)
            },
            ratio: format!(
                "{} ×{}",
                figure(c.ratio),
                if c.per_gpu { " per GPU" } else { "" }
            ),
            why: c.why.clone(),
        }),
        storage: or_dash(p.storage.as_ref().map(|s| match s.mb_per_s_per_gpu {
            Some(per_gpu) => format!("{} MB/s per GPU ({})", figure(per_gpu), s.source),
            None => format!("{} MB/s ({})", figure(s.mb_per_s), s.source),
        })),
        previous: or_dash(p.previous.map(|c| {
            format!(
                "{} ({}{:.1} %)",
                figure(c.before),
                if c.change_percent >= 0.0 { "+" } else { "" },
                c.change_percent
            )
        })),
        flags: flags(p),
    }
}

/// The report as one HTML document titled `title`, saying it was generated at
/// `generated_at` (as the caller writes times).
pub fn html(report: &Report, title: &str, generated_at: &str) -> Result<String, askama::Error> {
    let params = param_names(report);
    let labels = labels(report);
    let rows = report.points.iter().map(|p| row(p, &params)).collect();
    let scaling = report
        .scaling
        .iter()
        .flat_map(|s| {
            s.points.iter().map(|p| ScalingRow {
                series: s.params_key.replace(',', ", "),
                gpus: p.gpus,
                value: figure(p.value),
                ideal: figure(p.ideal),
                efficiency: percent(p.efficiency_percent),
            })
        })
        .collect();
    let sizing = report.sizing.as_ref().map(|s| SizingView {
        per_gpu: figure(s.mb_per_s_per_gpu),
        from_point: s.from_point.clone(),
        node: match s.node_mb_per_s {
            Some(n) => format!("{} MB/s per {} ({})", figure(n), s.node, s.node_from),
            None => "not known: no fio campaign and no published figure".to_string(),
        },
        rule: s.rule.as_ref().and_then(|r| {
            Some(format!(
                "{}: {} MB/s per GPU ({})",
                r.workload,
                figure(r.mb_per_s_per_gpu?),
                r.source
            ))
        }),
        needs: s
            .needs
            .iter()
            .map(|n| Need {
                gpus: n.gpus,
                demand: format!("{} MB/s", figure(n.demand_mb_per_s)),
                nodes: or_dash(n.nodes.as_ref().map(|x| x.formula.clone())),
                published: or_dash(n.published.as_ref().map(|x| x.formula.clone())),
            })
            .collect(),
    });
    let metric = match (&report.metric, &report.unit) {
        (Some(m), Some(u)) if !u.is_empty() => format!("{m} ({u})"),
        (Some(m), _) => m.clone(),
        _ => "nothing measured yet".to_string(),
    };
    ReportPage {
        title,
        generated_at,
        metric,
        progress: report.progress,
        unsteady: report.unsteady,
        slower: report.slower,
        compared: report.points.iter().any(|p| p.previous.is_some()),
        params,
        rows,
        bars: bars(report, &labels),
        lines: lines(report),
        scaling,
        sizing,
    }
    .render()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::benchmarks::campaign::matrix::Point;
    use crate::benchmarks::campaign::report::tests::{input, point, reference, run};
    use crate::benchmarks::campaign::report::{report, ReportInput};
    use crate::benchmarks::{Metric, RunSetup};
    use crate::store::BenchmarkRun;

    #[test]
    fn csv_fields_are_quoted_and_formulas_neutralised() {
        assert_eq!(text("plain"), "plain");
        assert_eq!(text("a,b"), "\"a,b\"");
        assert_eq!(text("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(text("two\nlines"), "\"two\nlines\"");
        assert_eq!(text("=1+2"), "'=1+2");
        assert_eq!(text("+1"), "'+1");
        assert_eq!(text("-1"), "'-1");
        assert_eq!(text("@SUM"), "'@SUM");
        assert_eq!(text("=a,b"), "\"'=a,b\"");
        assert_eq!(number(Some(1602.0)), "1602");
        assert_eq!(number(Some(-10.0)), "-10");
        assert_eq!(number(Some(2.3456)), "2.346");
        assert_eq!(number(None), "");

        let points = [Point {
            index: 0,
            gpus: 1,
            params: [
                ("A".to_string(), "=1+2".to_string()),
                ("B".into(), "x,y".into()),
            ]
            .into(),
        }];
        let runs = [run(0, 1, 900.0)];
        let reference = [BenchmarkRun {
            setup: RunSetup {
                suite: "tf_cnn_benchmarks".into(),
                model: Some("ResNet-50".into()),
                gpus: 1,
                nodes: 1,
                ..RunSetup::default()
            },
            source: "study \"2019\"".into(),
            metrics: vec![Metric {
                name: "images_per_sec".into(),
                value: 450.0,
                unit: "images/s".into(),
            }],
            ..BenchmarkRun::default()
        }];
        let previous: BTreeMap<String, f64> = [(points[0].key(), 1000.0)].into();
        let r = report(&ReportInput {
            previous: Some(&previous),
            ..input(&points, &runs, &reference)
        });
        let csv = csv(&r);
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(lines.len(), 3, "header, one row, and the end: {csv}");
        assert!(
            lines[0].starts_with("point,key,A,B,gpus,metric,unit,median,"),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[1],
            "0,\"gpus=1,A=%3D1+2,B=x%2Cy\",'=1+2,\"x,y\",1,images_per_sec,images/s,900,900,900,0,1,900,\
             \"study \"\"2019\"\"\",450,2,false,\"same model, precision not known, 1 GPU against 1\",,,1000,-10,slower"
        );
        let columns = lines[0].split(',').count();
        assert_eq!(columns, 4 + 19);
    }

    fn training_report() -> Report {
        let points = [
            point(0, 1, "64"),
            point(1, 2, "64"),
            point(2, 4, "64"),
            point(3, 8, "256"),
        ];
        let mut runs = vec![
            run(0, 1, 1500.0),
            run(0, 2, 1600.0),
            run(1, 1, 2900.0),
            run(2, 1, 5600.0),
            run(3, 1, 10000.0),
            run(3, 2, 12000.0),
        ];
        runs[0].read_mb_per_s = Some(120.0);
        runs[0].read_source = Some("<node> counters".into());
        let reference = reference();
        report(&input(&points, &runs, &reference))
    }

    /// Every `<svg …>…</svg>` of `html`.
    fn svgs(html: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let mut rest = html;
        while let Some(start) = rest.find("<svg") {
            let end = rest[start..].find("</svg>").expect("closed") + start + "</svg>".len();
            out.push(&rest[start..end]);
            rest = &rest[end..];
        }
        out
    }

    #[test]
    fn html_is_one_document_with_escaped_text_and_well_formed_charts() {
        let r = training_report();
        assert!(r.sizing.is_some() && !r.scaling.is_empty());
        let html = html(
            &r,
            "ResNet-50 <script>alert(1)</script> & co",
            "2025-01-02 03:04 UTC",
        )
        .expect("html");
        assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
        assert!(!html.contains("http"), "no URL of any kind");
        assert!(!html.contains("src="), "nothing loaded");
        assert!(
            !html.contains("<script"),
            "no script, and the title escaped"
        );
        assert!(!html.contains("href="), "no link");
        assert!(!html.contains("url("), "no style loads anything");
        assert!(
            html.contains(
                "<title>ResNet-50 &#60;script&#62;alert(1)&#60;/script&#62; &#38; co</title>"
            ),
            "{}",
            &html[..400]
        );
        assert!(html.contains("&#60;node&#62; counters"), "{html}");
        assert!(html.contains("2025-01-02 03:04 UTC"));
        assert!(
            html.contains("not a precise figure"),
            "point 3 spreads 18 %"
        );
        assert!(html.contains("same model and precision"));
        let charts = svgs(&html);
        assert_eq!(charts.len(), 2, "the bars and the scaling");
        for svg in &charts {
            let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}: {svg}"));
            assert_eq!(doc.root_element().tag_name().name(), "svg");
        }
        let bars = roxmltree::Document::parse(charts[0]).expect("bars");
        let rects = bars
            .descendants()
            .filter(|n| n.has_tag_name("rect"))
            .count();
        assert_eq!(
            rects, 8,
            "a median and a published bar for each of 4 points"
        );
        let scaling = roxmltree::Document::parse(charts[1]).expect("scaling");
        let circles = scaling
            .descendants()
            .filter(|n| n.has_tag_name("circle"))
            .count();
        assert_eq!(circles, 3, "BATCH=64 on 1, 2 and 4 GPUs");
        assert!(charts[1].contains("94 %"), "2900 / (2 × 1550)");
    }

    #[test]
    fn an_empty_report_renders_without_charts() {
        let points = [point(0, 1, "64")];
        let r = report(&input(&points, &[], &[]));
        let html = html(&r, "nothing yet", "now").expect("html");
        assert!(svgs(&html).is_empty());
        assert!(html.contains("nothing measured yet"));
        let csv = csv(&r);
        assert_eq!(csv.lines().count(), 2);
    }
}
