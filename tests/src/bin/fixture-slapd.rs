//! Run the test directory (tests/fixtures/ldap) for benchmarks and manual trials:
//! prints `ldap://127.0.0.1:PORT` and serves until standard input closes.
//!
//!   cargo run -p atrium-tests --bin fixture-slapd [--tls]

use std::io::Read;

use atrium_tests::support::ldap::{Slapd, SlapdOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let tls = std::env::args().any(|a| a == "--tls");
    let slapd = Slapd::start(SlapdOptions { tls }).await?;
    println!("{}", slapd.url());
    if let Some(ca) = slapd.ca_file() {
        println!("ca_file {}", ca.display());
    }
    tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    })
    .await?;
    drop(slapd);
    Ok(())
}
