//! What a site installs beside the binary (`deploy/`): the systemd unit passes
//! `systemd-analyze verify` with this build's binary in it.

use crate::fixtures::atrium_bin;

#[test]
fn the_systemd_unit_verifies() {
    let analyze = std::path::Path::new("/usr/bin/systemd-analyze");
    if !analyze.exists() {
        eprintln!("systemd-analyze is not installed: the unit is not verified here");
        return;
    }
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/systemd/atrium.service"),
    )
    .expect("the unit");
    // Job steps outlive a restart only if systemd kills the portal alone.
    assert!(unit.contains("\nKillMode=process\n"), "{unit}");
    assert!(unit.contains("ExecStart=/usr/bin/atrium --config /etc/atrium/atrium.toml serve"));
    // The capabilities it keeps are listed, and the ones it never uses are not: above
    // all CAP_SYS_RESOURCE, which would let it write past quotas and reserved blocks.
    let kept = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("a CapabilityBoundingSet");
    for needed in [
        "CAP_SETUID",
        "CAP_SETGID",
        "CAP_KILL",
        "CAP_SYS_ADMIN",
        "CAP_CHOWN",
    ] {
        assert!(
            kept.split_whitespace().any(|c| c == needed),
            "{needed}: {kept}"
        );
    }
    for never in [
        "CAP_SYS_RESOURCE",
        "CAP_SYS_MODULE",
        "CAP_SYS_RAWIO",
        "CAP_SYS_TIME",
        "CAP_SYS_BOOT",
    ] {
        assert!(!kept.contains(never), "{never}: {kept}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("atrium.service");
    let bin = atrium_bin();
    std::fs::write(
        &path,
        unit.replace("/usr/bin/atrium", &bin.display().to_string()),
    )
    .expect("write the unit");
    let out = std::process::Command::new(analyze)
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze verify");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Directives it cannot parse are only warned about: there must be none.
    assert!(
        !stderr.contains("atrium.service"),
        "systemd-analyze warns about the unit: {stderr}"
    );
}
