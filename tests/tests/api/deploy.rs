//! What a site installs beside the binary (`deploy/`): the systemd unit passes
//! `systemd-analyze verify` with this build's binary in it.

use crate::helpers::atrium_bin;

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
