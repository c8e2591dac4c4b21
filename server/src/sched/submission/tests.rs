//! Unit tests of submissions: directives and options, fields named in errors, and
//! every bound applied before parsing or expansion.

use super::*;

const LIMITS: SubmissionLimits = SubmissionLimits {
    max_script_bytes: DEFAULT_MAX_SCRIPT_BYTES,
    parse: ParseLimits {
        max_array_size: scheduler::MaxArraySize::DEFAULT,
    },
};

fn opts(v: serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    serde_json::from_value(v).expect("options")
}

#[test]
fn a_benchmark_is_marked_by_a_directive_or_the_submission() {
    let build_script = |script: &str, options: serde_json::Value| {
        build(
            Some(script),
            None,
            &opts(options),
            BTreeMap::new(),
            None,
            &LIMITS,
        )
    };
    let marked = |script: &str| {
        build_script(script, serde_json::json!({}))
            .expect("submission")
            .benchmark
    };
    assert_eq!(
        marked(
            "#!/bin/bash
#SBATCH -J io
#ATRIUM --benchmark=fio
fio x
"
        ),
        Some("fio".into())
    );
    assert_eq!(
        marked(
            "#!/bin/bash
#ATRIUM --benchmark
true
"
        ),
        Some("auto".into())
    );
    assert_eq!(
        marked(
            "#!/bin/bash
#ATRIUM --benchmark=nccl-tests
true
"
        ),
        Some("nccl_tests".into())
    );
    // After the first command it is a comment like any other, as #SBATCH is.
    assert_eq!(
        marked(
            "#!/bin/bash
true
#ATRIUM --benchmark
"
        ),
        None
    );
    let err = build_script(
        "#!/bin/bash
#ATRIUM --benchmark=hpl
",
        serde_json::json!({}),
    )
    .expect_err("unknown suite");
    assert!(
        err.to_string()
            .starts_with("benchmark: line 2: #ATRIUM: \"hpl\" is not a benchmark suite"),
        "{err}"
    );
    let err = build_script(
        "#!/bin/bash
#ATRIUM --fast
",
        serde_json::json!({}),
    )
    .expect_err("unknown option");
    assert_eq!(
        err.to_string(),
        "benchmark: line 2: #ATRIUM: unknown option \"--fast\""
    );
    let from_field = build_script(
        "#!/bin/bash
true
",
        serde_json::json!({"benchmark": "mlperf"}),
    )
    .expect("submission");
    assert_eq!(from_field.benchmark, Some("mlperf".into()));
    let err = build_script(
        "#!/bin/bash
true
",
        serde_json::json!({"benchmark": 3}),
    )
    .expect_err("not a suite");
    assert!(err.to_string().starts_with("benchmark: "), "{err}");
}

#[test]
fn directives_and_options_combine_with_options_winning() {
    let s = build(
        Some("#!/bin/bash\n#SBATCH -J first\n#SBATCH --time=10\necho hi\n"),
        None,
        &opts(serde_json::json!({"job-name": "second", "gres": "gpu:2", "hold": true})),
        BTreeMap::new(),
        Some("/home/alice".into()),
        &LIMITS,
    )
    .expect("valid");
    assert_eq!(s.request.name.as_deref(), Some("second"));
    assert!(s.request.hold);
    assert!(s.request.gpus.is_some());
    assert_eq!(
        s.request.time_limit,
        Some(scheduler::TimeLimit::Seconds(600))
    );
}

#[test]
fn a_bad_directive_names_its_line() {
    let e = build(
        Some("#!/bin/bash\n#SBATCH -J ok\n#SBATCH --time=soon\n"),
        None,
        &BTreeMap::new(),
        BTreeMap::new(),
        None,
        &LIMITS,
    )
    .expect_err("invalid");
    assert!(
        matches!(e, SubmissionError::Directive { line: 3, .. }),
        "{e:?}"
    );
}

#[test]
fn every_bad_directive_is_reported_at_once_each_with_its_line() {
    let script = "#!/bin/bash\n#SBATCH -N two\n#SBATCH -J ok\n#SBATCH --time=soon\n\
                  #SBATCH --frobnicate\n#SBATCH --gres=gpu:2\ntrue\n";
    let e = build(
        Some(script),
        None,
        &BTreeMap::new(),
        BTreeMap::new(),
        None,
        &LIMITS,
    )
    .expect_err("invalid");
    let lines: Vec<(usize, String)> = e
        .line_errors()
        .into_iter()
        .map(|l| (l.line, l.directive))
        .collect();
    assert_eq!(
        lines,
        [
            (2, "-N".to_string()),
            (4, "--time".to_string()),
            (5, "--frobnicate".to_string())
        ],
        "{e:?}"
    );
    // The line is named once for each directive, never twice.
    let text = e.to_string();
    assert!(text.starts_with("nodes: line 2: -N: "), "{text}");
    assert!(text.contains("; line 4: --time: "), "{text}");
    assert!(
        text.contains("; line 5: --frobnicate: unknown option"),
        "{text}"
    );
    assert!(!text.contains("line 2: line 2"), "{text}");
    for l in e.line_errors() {
        assert!(!l.message.contains("line "), "{l:?}");
    }
    // A good script has none.
    assert!(directive_errors(
        scheduler::parse_submission::<String>,
        "#!/bin/sh\n#SBATCH -N 1\ntrue\n",
        &[],
        &LIMITS.parse
    )
    .is_empty());
}

#[test]
fn bad_fields_are_named() {
    let e = build(None, None, &BTreeMap::new(), BTreeMap::new(), None, &LIMITS).expect_err("empty");
    assert!(matches!(
        e,
        SubmissionError::Field {
            field: "script",
            ..
        }
    ));
    let env = BTreeMap::from([("1BAD".to_string(), "x".to_string())]);
    let e = build(None, Some("true"), &BTreeMap::new(), env, None, &LIMITS).expect_err("env");
    assert!(matches!(
        e,
        SubmissionError::Field {
            field: "environment",
            ..
        }
    ));
    let e = build(
        None,
        Some("true"),
        &BTreeMap::new(),
        BTreeMap::new(),
        Some("relative".into()),
        &LIMITS,
    )
    .expect_err("dir");
    assert!(matches!(
        e,
        SubmissionError::Field {
            field: "working_directory",
            ..
        }
    ));
}

fn refused(
    script: Option<&str>,
    wrap: Option<&str>,
    options: serde_json::Value,
    environment: BTreeMap<String, String>,
    limits: &SubmissionLimits,
) -> SubmissionError {
    build(
        script,
        wrap,
        &opts(options),
        environment,
        Some("/home/alice".into()),
        limits,
    )
    .expect_err("refused")
}

#[test]
fn the_script_is_bounded_by_max_script_bytes() {
    let small = SubmissionLimits {
        max_script_bytes: 1024,
        ..LIMITS
    };
    let at_limit = format!("#!/bin/sh\n{}", "#".repeat(1024 - 11) + "\n");
    assert_eq!(at_limit.len(), 1024);
    assert!(build(
        Some(&at_limit),
        None,
        &BTreeMap::new(),
        BTreeMap::new(),
        None,
        &small
    )
    .is_ok());
    let over = format!("{at_limit}#");
    let e = refused(
        Some(&over),
        None,
        serde_json::json!({}),
        BTreeMap::new(),
        &small,
    );
    assert_eq!(e.field(), "script");
    assert!(
        e.to_string().starts_with("script: is 1025 bytes long"),
        "{e}"
    );
    let e = refused(
        None,
        Some(&"x".repeat(1025)),
        serde_json::json!({}),
        BTreeMap::new(),
        &small,
    );
    assert_eq!(e.field(), "wrap");
}

#[test]
fn directive_errors_name_the_directive_as_a_field_and_its_line() {
    let e = refused(
        Some("#!/bin/bash\n#SBATCH -J ok\n#SBATCH -a 0-5000\ntrue\n"),
        None,
        serde_json::json!({}),
        BTreeMap::new(),
        &LIMITS,
    );
    assert_eq!(e.field(), "array");
    assert!(
        e.to_string().starts_with("array: line 3: -a: task index"),
        "{e}"
    );
    let e = refused(
        None,
        Some("true"),
        serde_json::json!({"nodelist": format!("{}[1-2]", "n".repeat(100))}),
        BTreeMap::new(),
        &LIMITS,
    );
    assert_eq!(e.field(), "nodelist");
    // A site's larger MaxArraySize lets the same array in.
    let big = SubmissionLimits {
        parse: ParseLimits {
            max_array_size: scheduler::MaxArraySize::new(5001).expect("size"),
        },
        ..LIMITS
    };
    let s = build(
        None,
        Some("true"),
        &opts(serde_json::json!({"array": "0-5000,0-5000"})),
        BTreeMap::new(),
        None,
        &big,
    )
    .expect("fits");
    assert_eq!(s.request.array.map(|a| a.len()), Some(5001));
}

#[test]
fn options_and_the_environment_are_bounded_in_count_and_size() {
    let many: serde_json::Map<String, serde_json::Value> = (0..=MAX_DIRECTIVES)
        .map(|i| (format!("opt{i}"), serde_json::Value::Bool(true)))
        .collect();
    let e = refused(
        None,
        Some("true"),
        serde_json::Value::Object(many),
        BTreeMap::new(),
        &LIMITS,
    );
    assert_eq!(e.field(), "options");
    let e = refused(
        None,
        Some("true"),
        serde_json::json!({"comment": "c".repeat(9000)}),
        BTreeMap::new(),
        &LIMITS,
    );
    assert_eq!(e.field(), "options");

    let count: BTreeMap<String, String> = (0..=MAX_ENV_VARS)
        .map(|i| (format!("V{i}"), String::new()))
        .collect();
    let e = refused(None, Some("true"), serde_json::json!({}), count, &LIMITS);
    assert_eq!(e.field(), "environment");
    assert!(e.to_string().contains("4097 variables"), "{e}");
    let size = BTreeMap::from([("BIG".to_string(), "y".repeat(MAX_ENV_BYTES))]);
    let e = refused(None, Some("true"), serde_json::json!({}), size, &LIMITS);
    assert_eq!(e.field(), "environment");
    let fits = BTreeMap::from([("BIG".to_string(), "y".repeat(MAX_ENV_BYTES - 5))]);
    assert!(build(None, Some("true"), &BTreeMap::new(), fits, None, &LIMITS).is_ok());
}

#[test]
fn paths_are_bounded_by_path_max_after_expansion() {
    let sub = |options: serde_json::Value, dir: &str| {
        build(
            None,
            Some("true"),
            &opts(options),
            BTreeMap::new(),
            Some(dir.to_string()),
            &LIMITS,
        )
    };
    let e = sub(serde_json::json!({}), &format!("/{}", "d".repeat(PATH_MAX)))
        .expect_err("long working directory");
    assert_eq!(e.field(), "working_directory");

    let home = Path::new("/home/alice");
    let name = "j".repeat(255);
    let s = sub(
        serde_json::json!({"job-name": name, "output": "%x".repeat(15)}),
        "/home/alice",
    )
    .expect("parses");
    assert!(s.check_paths("alice", home).is_ok());
    let s = sub(
        serde_json::json!({"job-name": name, "output": "%x".repeat(2000)}),
        "/home/alice",
    )
    .expect("parses: the pattern itself is short");
    let e = s.check_paths("alice", home).expect_err("expands too far");
    assert_eq!(e.field(), "output");
    assert!(e.to_string().contains("PATH_MAX"), "{e}");
    let s = sub(
        serde_json::json!({"error": format!("{}/%N/%j", "e".repeat(4000))}),
        "/home/alice",
    )
    .expect("parses");
    assert_eq!(
        s.check_paths("alice", home).map_err(|e| e.field()),
        Err("error")
    );
    let chdir = |n: usize| {
        let s = sub(serde_json::json!({"chdir": "d".repeat(n)}), "/home/alice").expect("parses");
        let workdir = workdir(&s.request, s.submit_dir.as_deref(), home);
        s.check_paths("alice", &workdir).map_err(|e| e.field())
    };
    assert_eq!(chdir(4000), Ok(()));
    // Too long for the default output file, then for the directory itself.
    assert_eq!(chdir(4050), Err("chdir"));
    assert_eq!(chdir(4090), Err("chdir"));
}
