//! The floor of a proxy, for proxy benchmarks (bench/sessions.sh): a TCP listener that
//! relays every connection's bytes, both ways, to a unix socket and back, doing nothing
//! else: no HTTP, no authentication, no frames read. What a proxy on the same cores
//! cannot beat, as a server that only calls `sendfile` is the floor of a download.
//!
//!   bench-relay --listen 127.0.0.1:PORT --to /path/to/socket
//!
//! Prints `listening on ADDR` once it accepts. One thread, as the bench upstream.

use anyhow::{bail, Context};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut listen = None;
    let mut to = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next(),
            "--to" => to = args.next(),
            other => bail!("usage: bench-relay --listen ADDR --to SOCKET (not {other})"),
        }
    }
    let listen = listen.context("--listen ADDR")?;
    let to = std::path::PathBuf::from(to.context("--to SOCKET")?);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (mut client, _) = listener.accept().await?;
        client.set_nodelay(true)?;
        let to = to.clone();
        tokio::spawn(async move {
            if let Ok(mut upstream) = tokio::net::UnixStream::connect(&to).await {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        });
    }
}
