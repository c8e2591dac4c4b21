//! Unit tests for every directive, time format and error message.

use super::*;
use crate::model::*;

fn script(lines: &[&str]) -> String {
    let mut s = String::from("#!/bin/bash\n");
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s.push_str("srun python train.py\n");
    s
}

fn one(line: &str) -> JobRequest {
    match parse_script(&script(&[line])) {
        Ok(r) => r,
        Err(e) => panic!("{line}: {e}"),
    }
}

fn err(line: &str) -> ParseError {
    match parse_script(&script(&[line])) {
        Ok(r) => panic!("{line}: expected an error, got {r:?}"),
        Err(e) => e,
    }
}

#[test]
fn published_example() {
    let r = one("#SBATCH -N 2 -n 8 --ntasks-per-node 4 -p sxm2 --gres=gpu:4");
    assert_eq!(r.nodes, Some(NodeRange { min: 2, max: 2 }));
    assert_eq!(r.ntasks, Some(8));
    assert_eq!(r.ntasks_per_node, Some(4));
    assert_eq!(r.partition.as_deref(), Some("sxm2"));
    assert_eq!(
        r.gpus,
        Some(GpuRequest {
            kind: SliceKind::Gpu { r#type: None },
            count: 4,
            per: GpuPer::Node
        })
    );
}

#[test]
fn directives_stop_at_first_command() {
    let s = "#!/bin/bash\n# a comment\n\n#SBATCH -J first\necho hi\n#SBATCH -J second\n";
    assert_eq!(parse_script(s).unwrap().name.as_deref(), Some("first"));
    // `#SBATCHX` and `# SBATCH` are comments.
    let s = "#SBATCHX -J a\n# SBATCH --bogus\n#SBATCH -J b\n";
    assert_eq!(parse_script(s).unwrap().name.as_deref(), Some("b"));
}

#[test]
fn both_value_forms_and_attached_short_values() {
    for l in [
        "#SBATCH --job-name=train",
        "#SBATCH --job-name train",
        "#SBATCH -J train",
        "#SBATCH -Jtrain",
        "#SBATCH -J=train",
        "#SBATCH -J \"train\" # trailing comment",
    ] {
        assert_eq!(one(l).name.as_deref(), Some("train"), "{l}");
    }
    assert_eq!(one("#SBATCH -J 'a b'").name.as_deref(), Some("a b"));
}

#[test]
fn every_directive() {
    let r = parse_script(&script(&[
        "#SBATCH --job-name=x --partition=p --nodes=1-3 --ntasks=4 --ntasks-per-node=2",
        "#SBATCH --cpus-per-task=3 --mem=16G --cpus-per-gpu=6",
        "#SBATCH --gpus-per-node=a100:2 --time=1-00:00:00 --array=0-9:3%2",
        "#SBATCH --dependency=afterok:12:13_2 --output=out-%j.txt --error=err-%A_%a.txt",
        "#SBATCH --chdir=/scratch --export=ALL,FOO=bar --account=lab --qos=high --hold",
        "#SBATCH --begin=now+1hour --exclusive --nodelist=n[1-2] --exclude=n3",
        "#SBATCH --constraint=ib&nvlink --comment=hello --no-requeue --nice=10",
    ]))
    .unwrap();
    assert_eq!(r.name.as_deref(), Some("x"));
    assert_eq!(r.partition.as_deref(), Some("p"));
    assert_eq!(r.nodes, Some(NodeRange { min: 1, max: 3 }));
    assert_eq!(
        (r.ntasks, r.ntasks_per_node, r.cpus_per_task),
        (Some(4), Some(2), Some(3))
    );
    assert_eq!(r.memory, Some(MemoryRequest::PerNode(16 * 1024)));
    assert_eq!(r.cpus_per_gpu, Some(6));
    assert_eq!(
        r.gpus,
        Some(GpuRequest {
            kind: SliceKind::Gpu {
                r#type: Some("a100".into())
            },
            count: 2,
            per: GpuPer::Node
        })
    );
    assert_eq!(r.time_limit, Some(TimeLimit::Seconds(86_400)));
    let a = r.array.clone().unwrap();
    assert_eq!(a.indices().collect::<Vec<_>>(), vec![0, 3, 6, 9]);
    assert_eq!(a.max_running, Some(2));
    let d = r.dependency.clone().unwrap();
    assert_eq!(d.to_string(), "afterok:12:13_2");
    assert_eq!(r.output.as_deref(), Some("out-%j.txt"));
    assert_eq!(r.error.as_deref(), Some("err-%A_%a.txt"));
    assert_eq!(r.chdir.as_deref(), Some("/scratch"));
    let e = r.export.clone().unwrap();
    assert!(e.all);
    assert_eq!(e.vars, vec![("FOO".to_string(), Some("bar".to_string()))]);
    assert_eq!(r.account.as_deref(), Some("lab"));
    assert_eq!(r.qos.as_deref(), Some("high"));
    assert!(r.hold && r.exclusive);
    assert_eq!(
        r.begin.as_ref().unwrap().resolve(1000).unwrap(),
        1000 + 3600
    );
    assert_eq!(r.nodelist, vec!["n1", "n2"]);
    assert_eq!(r.exclude, vec!["n3"]);
    assert_eq!(
        r.constraint.as_ref().unwrap().any_of,
        vec![vec!["ib".to_string(), "nvlink".to_string()]]
    );
    assert_eq!(r.comment.as_deref(), Some("hello"));
    assert_eq!(r.requeue, Some(false));
    assert_eq!(r.nice, Some(10));
}

#[test]
fn short_options() {
    let r = parse_script(&script(&[
        "#SBATCH -J j -p p -N 2 -n 4 -c 2 -G h100:8 -t 30 -a 1,3 -d afterany:5",
        "#SBATCH -o o -e e -D /d -A acct -q normal -H -w n1 -x n2 -C a|b -b 16:00",
    ]))
    .unwrap();
    assert_eq!(r.gpus.as_ref().unwrap().per, GpuPer::Job);
    assert_eq!(r.gpus.as_ref().unwrap().count, 8);
    assert_eq!(r.time_limit, Some(TimeLimit::Seconds(1800)));
    assert_eq!(
        r.array.as_ref().unwrap().indices().collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert_eq!(r.constraint.as_ref().unwrap().any_of.len(), 2);
    assert!(r.hold);
    assert_eq!(r.requeue, None);
    assert_eq!(one("#SBATCH --requeue").requeue, Some(true));
}

#[test]
fn memory_forms() {
    assert_eq!(
        one("#SBATCH --mem=16000").memory,
        Some(MemoryRequest::PerNode(16000))
    );
    assert_eq!(
        one("#SBATCH --mem=500M").memory,
        Some(MemoryRequest::PerNode(500))
    );
    assert_eq!(
        one("#SBATCH --mem=2T").memory,
        Some(MemoryRequest::PerNode(2 << 20))
    );
    assert_eq!(
        one("#SBATCH --mem=1500K").memory,
        Some(MemoryRequest::PerNode(2))
    );
    assert_eq!(
        one("#SBATCH --mem-per-cpu=4G").memory,
        Some(MemoryRequest::PerCpu(4096))
    );
    assert_eq!(
        one("#SBATCH --mem-per-gpu 48g").memory,
        Some(MemoryRequest::PerGpu(48 * 1024))
    );
    assert_eq!(
        err("#SBATCH --mem=lots").to_string(),
        "line 2: --mem: expected a size like 16G, 500M, 64000MB or 16000 (MB), got \"lots\""
    );
    // Units with or without B; 0 is all of the node's memory.
    for (v, mb) in [
        ("64000MB", 64000),
        ("170GB", 170 * 1024),
        ("1tb", 1 << 20),
        ("2048KB", 2),
    ] {
        assert_eq!(
            one(&format!("#SBATCH --mem={v}")).memory,
            Some(MemoryRequest::PerNode(mb)),
            "{v}"
        );
    }
    assert_eq!(
        one("#SBATCH --mem=0").memory,
        Some(MemoryRequest::PerNode(0))
    );
    assert!(err("#SBATCH --mem-per-gpu=0").message.contains("positive"));
    assert!(err("#SBATCH --mem=12B").message.contains("expected a size"));
}

#[test]
fn gres_forms() {
    let g = |l: &str| one(l).gpus.unwrap();
    assert_eq!(g("#SBATCH --gres=gpu").count, 1);
    assert_eq!(g("#SBATCH --gres=gpu:2").count, 2);
    assert_eq!(
        g("#SBATCH --gres=gpu:a100").kind,
        SliceKind::Gpu {
            r#type: Some("a100".into())
        }
    );
    let mig = g("#SBATCH --gres=gpu:1g.10gb:3");
    assert_eq!(
        (mig.kind, mig.count),
        (
            SliceKind::Gpu {
                r#type: Some("1g.10gb".into())
            },
            3
        )
    );
    let sh = g("#SBATCH --gres=shard:4");
    assert_eq!(
        (sh.kind, sh.count, sh.per),
        (SliceKind::Shard, 4, GpuPer::Node)
    );
    assert_eq!(g("#SBATCH --gpus=3").per, GpuPer::Job);
    // `--gres=none` takes back an earlier request, as Slurm's does.
    assert_eq!(one("#SBATCH --gres=gpu:2\n#SBATCH --gres=none").gpus, None);
    assert_eq!(
        err("#SBATCH -N 1\n#SBATCH --gres=gpu:x:").to_string(),
        "line 3: --gres: expected gpu[:type]:count or shard:count, got \"gpu:x:\""
    );
    assert_eq!(
        err("#SBATCH --gres=gpu:a:b:c").to_string(),
        "line 2: --gres: expected gpu[:type]:count or shard:count, got \"gpu:a:b:c\""
    );
    assert!(err("#SBATCH --gres=gpu:0").message.contains("expected gpu"));
    assert!(err("#SBATCH --gres=gpu:1,shard:1")
        .message
        .contains("only one gres"));
    assert!(err("#SBATCH --gres=fpga:1")
        .message
        .contains("expected gpu"));
    assert_eq!(
        err("#SBATCH --gres=gpu:2 --gpus=2").message,
        "conflicts with --gres"
    );
    assert!(err("#SBATCH -G a100:").message.contains("[type:]count"));
}

#[test]
fn every_time_format() {
    let t = |s: &str| s.parse::<TimeLimit>().unwrap();
    assert_eq!(t("30"), TimeLimit::Seconds(30 * 60));
    assert_eq!(t("30:15"), TimeLimit::Seconds(30 * 60 + 15));
    assert_eq!(t("2:30:15"), TimeLimit::Seconds(2 * 3600 + 30 * 60 + 15));
    assert_eq!(t("1-2"), TimeLimit::Seconds(86_400 + 7200));
    assert_eq!(t("1-2:30"), TimeLimit::Seconds(86_400 + 7200 + 1800));
    assert_eq!(
        t("1-2:30:15"),
        TimeLimit::Seconds(86_400 + 7200 + 1800 + 15)
    );
    assert_eq!(t("0"), TimeLimit::Unlimited);
    assert_eq!(t("UNLIMITED"), TimeLimit::Unlimited);
    assert_eq!(t("infinite"), TimeLimit::Unlimited);
    assert_eq!(t("90").to_string(), "01:30:00");
    assert_eq!(t("2-0").to_string(), "2-00:00:00");
    for bad in [
        "",
        "x",
        "1:2:3:4",
        "1-25",
        "1-2:60",
        "10:61",
        "1:60:00",
        "-5",
        "1-",
        "1-2:3:4:5",
        "1.5",
    ] {
        let e = err(&format!("#SBATCH --time={bad}"));
        assert_eq!(e.directive, "--time", "{bad}");
        assert!(
            e.message.starts_with("expected minutes"),
            "{bad}: {}",
            e.message
        );
    }
}

#[test]
fn begin_formats() {
    // 2024-03-10 12:00:00 UTC
    let now = crate::parse::days_from_civil(2024, 3, 10) * 86_400 + 12 * 3600;
    let day = now - 12 * 3600;
    let b = |s: &str| s.parse::<BeginTime>().unwrap().resolve(now).unwrap();
    assert_eq!(b("now"), now);
    assert_eq!(b("now+60"), now + 60);
    assert_eq!(b("now+10minutes"), now + 600);
    assert_eq!(b("now+2hours"), now + 7200);
    assert_eq!(b("now+1days"), now + 86_400);
    assert_eq!(b("now+1week"), now + 7 * 86_400);
    assert_eq!(b("16:00"), day + 16 * 3600);
    assert_eq!(b("16:00:30"), day + 16 * 3600 + 30);
    assert_eq!(
        b("10:00"),
        day + 86_400 + 10 * 3600,
        "a past time of day means tomorrow"
    );
    assert_eq!(b("4:00PM"), day + 16 * 3600);
    assert_eq!(b("12:30am"), day + 86_400 + 1800);
    assert_eq!(b("2024-03-12"), day + 2 * 86_400);
    assert_eq!(b("2024-03-12T08:30"), day + 2 * 86_400 + 8 * 3600 + 1800);
    assert_eq!(
        b("2024-03-12T08:30:05"),
        day + 2 * 86_400 + 8 * 3600 + 1800 + 5
    );
    assert_eq!(b("03/12"), day + 2 * 86_400);
    assert_eq!(b("03/12/24"), day + 2 * 86_400);
    assert_eq!(b("03.12.24"), day + 2 * 86_400);
    assert_eq!(b("0312"), day + 2 * 86_400);
    assert_eq!(b("031224"), day + 2 * 86_400);
    assert_eq!(
        b("01/01"),
        crate::parse::days_from_civil(2025, 1, 1) * 86_400
    );
    assert_eq!(b("midnight"), day + 86_400);
    assert_eq!(b("noon"), day + 12 * 3600);
    assert_eq!(b("elevenses"), day + 86_400 + 11 * 3600);
    assert_eq!(b("fika"), day + 15 * 3600);
    assert_eq!(b("teatime"), day + 16 * 3600);
    assert_eq!(b("today"), day);
    assert_eq!(b("tomorrow"), day + 86_400);
    for bad in [
        "later",
        "now+",
        "now+5years",
        "25:00",
        "2024-13-01",
        "02/30",
        "13:00PM",
        "2024-03-12T",
    ] {
        let e = err(&format!("#SBATCH --begin={bad}"));
        assert!(
            e.message.starts_with("expected now"),
            "{bad}: {}",
            e.message
        );
    }
    assert_eq!(
        crate::parse::civil_from_days(crate::parse::days_from_civil(2000, 2, 29)),
        (2000, 2, 29)
    );
}

#[test]
fn array_forms() {
    let a = |s: &str| s.parse::<ArraySpec>().unwrap();
    assert_eq!(a("0-3").indices().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert_eq!(a("1,5,7").indices().collect::<Vec<_>>(), vec![1, 5, 7]);
    assert_eq!(a("0-10:5").indices().collect::<Vec<_>>(), vec![0, 5, 10]);
    assert_eq!(a("0-11:5").to_string(), "0-10:5");
    assert_eq!(
        a("1-3,2-5").indices().collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    assert_eq!(a("1-3,2-5").to_string(), "1-5");
    let l = a("0-99%4");
    assert_eq!((l.len(), l.max_running), (100, Some(4)));
    assert_eq!(l.to_string(), "0-99%4");
    for bad in [
        "",
        "a",
        "3-1",
        "1-5:0",
        "1-5%0",
        "1,,2",
        "0-2000000",
        "1%",
        "%2",
    ] {
        assert_eq!(
            err(&format!("#SBATCH --array={bad}")).directive,
            "--array",
            "{bad}"
        );
    }
    assert!(err("#SBATCH --array=0-2000000").message.contains("above"));
}

#[test]
fn dependency_forms() {
    let d = |s: &str| s.parse::<Dependency>().unwrap();
    let x = d("after:10+5:11");
    assert_eq!(x.items[0].kind, DepKind::After);
    assert_eq!(x.items[0].targets[0].delay_secs, 300);
    assert_eq!(x.items[0].targets[1].job, JobId::new(11));
    assert_eq!(x.to_string(), "after:10+5:11");
    let y = d("afterok:1,afternotok:2_3,singleton");
    assert!(!y.any);
    assert_eq!(y.items.len(), 3);
    assert_eq!(y.items[1].targets[0].job, JobId::task(2, 3));
    assert_eq!(y.items[2].kind, DepKind::Singleton);
    let z = d("afterany:1?afterok:2");
    assert!(z.any);
    assert_eq!(z.to_string(), "afterany:1?afterok:2");
    for bad in [
        "",
        "afterok",
        "afterok:",
        "afterok:x",
        "before:1",
        "afterok:1+5",
        "afterok:1,afterany:2?after:3",
        "after:1+x",
    ] {
        assert_eq!(
            err(&format!("#SBATCH --dependency={bad}")).directive,
            "--dependency",
            "{bad}"
        );
    }
}

#[test]
fn output_patterns() {
    let cx = PatternContext {
        job: JobId::task(42, 7),
        user: "alice",
        name: "train",
        node: "n01",
    };
    assert_eq!(expand_pattern("%x-%j.out", &cx).unwrap(), "train-42_7.out");
    assert_eq!(
        expand_pattern("%A_%a-%u-%N-%%", &cx).unwrap(),
        "42_7-alice-n01-%"
    );
    assert_eq!(
        expand_pattern("slurm-%4a.out", &cx).unwrap(),
        "slurm-0007.out"
    );
    // Slurm leaves an unknown letter as written; %J is %j for the batch step.
    assert_eq!(
        expand_pattern("out-%q-%J.%s", &cx).unwrap(),
        "out-%q-42_7.batch"
    );
    let e = err("#SBATCH -o out-%");
    assert_eq!(
        e.to_string(),
        "line 2: -o: expected a path with %j, %J, %A, %a, %u, %x, %N, %n, %s, %t or %%, got \"out-%\""
    );
}

#[test]
fn hostlists_and_constraints_and_export() {
    assert_eq!(
        expand_hostlist("n[01-03,07],gpu5").unwrap(),
        vec!["n01", "n02", "n03", "n07", "gpu5"]
    );
    assert_eq!(
        compress_hostlist(&["n01", "n02", "n03", "n07", "gpu5"]),
        "n[01-03,07],gpu5"
    );
    for bad in ["", "n[", "n[3-1]", "n[a]", "n]", ",", "n[[1]]"] {
        assert!(expand_hostlist(bad).is_err(), "{bad}");
    }
    assert_eq!(hostlist_count("n[01-03,07],gpu5"), 5);
    assert_eq!(hostlist_count(""), 0);
    assert_eq!(hostlist_count("n["), 1, "unreadable, but a node");
    let c: Constraint = "a&b|c".parse().unwrap();
    assert!(c.matches(&["c".into()]));
    assert!(c.matches(&["a".into(), "b".into()]));
    assert!(!c.matches(&["a".into()]));
    assert!(err("#SBATCH -C a&&b").message.contains("features"));
    let e: ExportSpec = "NONE,A=1,B".parse().unwrap();
    assert!(!e.all);
    assert_eq!(e.to_string(), "NONE,A=1,B");
    assert!(err("#SBATCH --export=1BAD").message.contains("ALL, NONE"));
}

#[test]
fn error_messages_name_line_and_directive() {
    let e = err("#SBATCH --frobnicate=1");
    assert_eq!(e.to_string(), "line 2: --frobnicate: unknown option");
    let e = err("#SBATCH -Z");
    assert_eq!(e.to_string(), "line 2: -Z: unknown option");
    let e = err("#SBATCH -N");
    assert_eq!(e.to_string(), "line 2: -N: missing value");
    let e = err("#SBATCH -N two");
    assert_eq!(
        e.to_string(),
        "line 2: -N: expected a positive number, got \"two\""
    );
    let e = err("#SBATCH --hold=yes");
    assert_eq!(e.to_string(), "line 2: --hold: takes no value");
    let e = err("#SBATCH nodes=2");
    assert_eq!(
        e.to_string(),
        "line 2: nodes=2: expected an option starting with - or --"
    );
    let e = err("#SBATCH -J \"unterminated");
    assert_eq!(e.to_string(), "line 2: #SBATCH: unterminated quote");
    assert!(err("#SBATCH -N 3-1").message.contains("min[-max]"));
    assert!(err("#SBATCH --nice=x").message.contains("integer"));
    assert!(err("#SBATCH -n 0").message.contains("positive"));
}

#[test]
fn command_line_args() {
    let r = parse_args(&["-N", "2", "--gres=gpu:4", "-t", "1:00:00"]).unwrap();
    assert_eq!(r.nodes.unwrap().min, 2);
    assert_eq!(
        parse_args(&["--bogus"]).unwrap_err().to_string(),
        "line 0: --bogus: unknown option"
    );
}

#[test]
fn typed_request_round_trips_through_json() {
    let r = one("#SBATCH -N 2 -t 1-00:00 --array=1-5%2 -d afterok:3 --gres=gpu:1g.10gb:2 --begin=noon -C x|y --export=ALL");
    let json = serde_json::to_string(&r).unwrap();
    let back: JobRequest = serde_json::from_str(&json).unwrap();
    assert_eq!(r, back);
    let typed: JobRequest = serde_json::from_str(
        r#"{"name":"nb","gpus":{"kind":{"gpu":{"type":null}},"count":2,"per":"node"},"time_limit":"8:00:00","dependency":"afterany:1"}"#,
    )
    .unwrap();
    assert_eq!(typed.time_limit, Some(TimeLimit::Seconds(8 * 3600)));
    assert!(serde_json::from_str::<JobRequest>(r#"{"time_limit":"soon"}"#).is_err());
    assert!(serde_json::from_str::<JobRequest>(r#"{"bogus":1}"#).is_err());
}

#[test]
fn options_real_scripts_use_are_accepted() {
    let r = parse_script(&script(&[
        "#SBATCH --mail-type=END,FAIL",
        "#SBATCH --mail-user=alice@example.org",
        "#SBATCH --signal=B:USR1@120",
        "#SBATCH --open-mode=append",
        "#SBATCH --output=logs/%x-%J.out",
        "#SBATCH --constraint=[ivb|hsw]",
        "#SBATCH -L scratch",
        "#SBATCH --get-user-env",
        "#SBATCH --cores-per-socket=8 --threads-per-core=1",
        "#SBATCH --ntasks-per-gpu=2 --gres=gpu:2",
        "#SBATCH --clusters=main",
        "#SBATCH --err=e.log --out=o.log --no-reque",
    ]))
    .unwrap();
    assert_eq!(r.mail_type.unwrap().to_string(), "END,FAIL");
    assert_eq!(r.mail_user.as_deref(), Some("alice@example.org"));
    let s = r.signal.unwrap();
    assert_eq!((s.signal, s.batch_only, s.seconds_before), (10, true, 120));
    assert_eq!(r.open_mode, Some(OpenMode::Append));
    assert_eq!(r.output.as_deref(), Some("o.log"));
    assert_eq!(r.error.as_deref(), Some("e.log"));
    assert_eq!(r.requeue, Some(false));
    assert_eq!(
        r.licenses,
        [License {
            name: "scratch".into(),
            count: 1
        }]
    );
    assert!(r.get_user_env);
    assert_eq!(r.ntasks, Some(4), "2 tasks per GPU, 2 GPUs");
    let ignored: Vec<&str> = r.ignored.iter().map(|i| i.option.as_str()).collect();
    assert_eq!(
        ignored,
        [
            "--cores-per-socket=8",
            "--threads-per-core=1",
            "--clusters=main"
        ]
    );
    assert!(r.ignored.iter().all(|i| !i.reason.is_empty()));
}

#[test]
fn signal_grammar_is_slurms() {
    let sig = |v: &str| v.parse::<SignalSpec>();
    assert_eq!(sig("USR1").unwrap().to_string(), "USR1@60");
    assert_eq!(sig("SIGTERM@30").unwrap().signal, 15);
    assert_eq!(sig("10@5").unwrap().to_string(), "USR1@5");
    assert_eq!(sig("R:USR2@7").unwrap().to_string(), "R:USR2@7");
    assert_eq!(sig("RB:2").unwrap().to_string(), "RB:INT@60");
    for bad in ["", "X:USR1", "USR9", "USR1@", "USR1@-3", "USR1@70000", "99"] {
        assert!(sig(bad).is_err(), "{bad}");
    }
    let e = err("#SBATCH --signal=B:NOPE@10");
    assert_eq!((e.field, e.line), ("signal", 2));
}

#[test]
fn long_options_may_be_abbreviated_and_short_flags_grouped() {
    let r = parse_args(&["--job=x", "--part", "gpu", "-Hk", "--nic"]).unwrap();
    assert_eq!(r.name.as_deref(), Some("x"));
    assert_eq!(r.partition.as_deref(), Some("gpu"));
    assert!(r.hold);
    assert_eq!(r.nice, Some(100), "--nice without a value is 100");
    assert_eq!(r.ignored.len(), 1, "-k (no-kill) is ignored here");
    let e = parse_args(&["--mem-per=4G"]).unwrap_err();
    assert!(e.message.contains("ambiguous"), "{e}");
    let e = parse_args(&["--hold=yes"]).unwrap_err();
    assert_eq!((e.field, e.message.as_str()), ("hold", "takes no value"));
    let e = parse_args(&["--uid=0"]).unwrap_err();
    assert_eq!(e.field, "uid");
    // An optional value is taken only with `=`.
    let e = parse_args(&["--exclusive", "user"]).unwrap_err();
    assert_eq!(e.directive, "user");
}

#[test]
fn gpus_per_task_and_tasks_per_gpu_make_the_request() {
    let r = parse_args(&["-n", "4", "--gpus-per-task=a100:1"]).unwrap();
    assert_eq!(
        r.gpus,
        Some(GpuRequest {
            kind: SliceKind::Gpu {
                r#type: Some("a100".into())
            },
            count: 4,
            per: GpuPer::Job
        })
    );
    assert_eq!(r.gpus_per_task, Some(1));
    // Given GPUs win; --gpus-per-task then only binds.
    let r = parse_args(&["--gres=gpu:2", "--ntasks-per-node=2", "--gpus-per-task=1"]).unwrap();
    assert_eq!(r.gpus.unwrap().count, 2);
    // Options given beside a script override its directives, GPUs included.
    let r = parse_submission(
        &script(&["#SBATCH --gres=gpu:2 -J a"]),
        &["--gpus=1", "-J", "b"],
        &ParseLimits::default(),
    )
    .unwrap();
    assert_eq!((r.gpus.unwrap().count, r.name.as_deref()), (1, Some("b")));
}

#[test]
fn every_option_of_the_table_parses_with_a_typical_value() {
    for o in options::SBATCH_OPTIONS {
        let value = match o.long {
            "array" => "0-3",
            "begin" | "deadline" => "now+1hour",
            "dependency" => "afterok:1",
            "export" => "ALL",
            "exclude" | "nodelist" => "n1",
            "gres" => "gpu:1",
            "gpus" | "gpus-per-node" | "gpus-per-task" | "gpus-per-socket" => "1",
            "licenses" => "scratch:2",
            "mail-type" => "ALL",
            "mem" | "mem-per-cpu" | "mem-per-gpu" | "tmp" => "4G",
            "open-mode" => "append",
            "signal" => "USR1@30",
            "time" | "time-min" | "delay-boot" => "10",
            "wait-all-nodes" => "1",
            "exclusive" => "user",
            "no-kill" => "off",
            "oom-kill-step" => "1",
            "constraint" => "[ivb|hsw]&ib",
            "kill-on-invalid-dep" => "yes",
            "extra-node-info" => "2:4:1",
            "switches" => "1@10",
            _ => "4",
        };
        let word = match o.arg {
            options::Arg::None => format!("--{}", o.long),
            _ => format!("--{}={value}", o.long),
        };
        let got = parse_args(&[word.as_str()]);
        match o.support {
            options::Support::Refused(_) => assert!(got.is_err(), "{word}"),
            options::Support::Implemented => {
                let r = got.unwrap_or_else(|e| panic!("{word}: {e}"));
                assert!(r.ignored.is_empty(), "{word}");
            }
            options::Support::Ignored(_) | options::Support::Client => {
                let r = got.unwrap_or_else(|e| panic!("{word}: {e}"));
                assert_eq!(r.ignored.len(), 1, "{word}");
            }
        }
    }
}

#[test]
fn read_for_slurm_skips_what_this_parser_refuses_but_keeps_the_bounds() {
    let s = script(&[
        "#SBATCH --gres=gpu:a100:2(S:0-1) -t 10",
        "#SBATCH --frobnicate -p gpu --uid=alice",
    ]);
    assert!(parse_submission::<&str>(&s, &[], &ParseLimits::default()).is_err());
    let r = read_submission(&s, &["-J", "x", "--bogus=1"], &ParseLimits::default()).unwrap();
    assert_eq!(r.time_limit, Some(TimeLimit::Seconds(600)));
    assert_eq!(r.partition.as_deref(), Some("gpu"));
    assert_eq!(r.name.as_deref(), Some("x"));
    assert_eq!(r.gpus, None);
    let long = format!(
        "#SBATCH --comment={}",
        "c".repeat(limits::MAX_DIRECTIVE_BYTES)
    );
    assert!(read_submission::<&str>(&script(&[&long]), &[], &ParseLimits::default()).is_err());
}

/// Disagreements with Slurm 22.05 found by the differential test (issue 22).
#[test]
fn what_slurm_refuses_or_accepts_is_refused_or_accepted_here() {
    // --exclusive's modes in slurm_opt.c: exclusive, oversubscribe, user, mcs.
    assert!(parse_args(&["--exclusive=exclusive"]).unwrap().exclusive);
    assert!(parse_args(&["--exclusive=USER"]).unwrap().exclusive);
    assert!(
        !parse_args(&["--exclusive=oversubscribe"])
            .unwrap()
            .exclusive
    );
    let e = parse_args(&["--exclusive=bogus"]).unwrap_err();
    assert_eq!(e.field, "exclusive");
    // Topology counts are read with parse_int(positive): 0 is refused; only
    // --core-spec may be 0.
    for word in [
        "--threads-per-core=0",
        "--cores-per-socket=0",
        "--sockets-per-node=0",
        "--mincpus=0",
        "--ntasks-per-core=0",
        "--thread-spec=0",
        "--switches=0",
    ] {
        assert!(parse_args(&[word]).is_err(), "{word}");
    }
    assert!(parse_args(&["--core-spec=0"]).is_ok());
    assert!(parse_args(&["--threads-per-core=1"]).is_ok());
    // slurmctld maps --mem-per-cpu=0 to --mem=0 (all of each node's memory).
    assert_eq!(
        parse_args(&["--mem-per-cpu=0"]).unwrap().memory,
        Some(MemoryRequest::PerNode(0))
    );
    // A GPU type alone is one GPU of it, as gpu:a100 is in --gres.
    for word in ["--gpus=a100", "--gpus-per-node=1g.10gb"] {
        let g = parse_args(&[word]).unwrap().gpus.unwrap();
        assert_eq!(g.count, 1, "{word}");
        assert!(
            matches!(g.kind, SliceKind::Gpu { r#type: Some(_) }),
            "{word}"
        );
    }
    assert!(parse_args(&["--gpus=0"]).is_err());
}
