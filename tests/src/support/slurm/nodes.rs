//! The compute nodes of the multi-node Slurm fixture ([`super::SlurmOptions::multi_node`]):
//! each `slurmd` runs in a network and UTS namespace of its own, with its own hostname, and
//! reaches slurmctld over a private bridge that the fixture creates and removes.
//!
//! ```text
//!   host namespace: bridge atbXXXXXX 10.A.B.1/24  ── slurmctld, slurmdbd, the portal
//!      │ veth atbXXXXXXn1        │ veth …n2               │ veth …n3
//!   node1: eth0 10.A.B.11   node2: eth0 10.A.B.12   node3: eth0 10.A.B.13
//! ```
//!
//! The subnet is a /24 of 10.128.0.0/9 that no interface of the host uses, picked at random;
//! no traffic leaves the bridge (the host does not forward). Names resolve through
//! nss_wrapper's hosts file (`DIR/hosts`), which the daemons and the jobs' tasks read: Slurm
//! resolves each node's name, and no DNS is reachable here.
//!
//! A node is a process holding the namespaces (`sleep infinity`, the [`Supervised`] child)
//! with `slurmd` beside it. [`kill_namespace`] kills every process of a node but the holder:
//! slurmd, its `slurmstepd`s and the jobs go at once, as when a node crashes, while the
//! address stays (connections are refused rather than timing out), and slurmctld marks the
//! node down after `SlurmdTimeout`.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;

use super::super::process::{find_binary, output_of};
use super::super::wait;

/// One compute node of the multi-node cluster: its name and its typed GPUs.
#[derive(Debug, Clone, Copy)]
pub struct NodeSpec {
    /// `NodeName`, also the node's hostname inside its namespace.
    pub name: &'static str,
    /// Its GPUs by type, in `gres.conf` order.
    pub gpus: &'static [(&'static str, u32)],
}

impl NodeSpec {
    /// The node's `Gres=` as `sinfo -o %G` prints it (`(null)` for none is left to Slurm).
    pub fn gres(&self) -> String {
        self.gpus
            .iter()
            .map(|(kind, n)| format!("gpu:{kind}:{n}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The nodes of the multi-node cluster: two with typed GPUs (the second also with MIG-style
/// slices, which only it has), one with CPUs only.
pub const CLUSTER_NODES: [NodeSpec; 3] = [
    NodeSpec {
        name: "node1",
        gpus: &[("a100", 2)],
    },
    NodeSpec {
        name: "node2",
        gpus: &[("a100", 2), ("1g.10gb", 2)],
    },
    NodeSpec {
        name: "node3",
        gpus: &[],
    },
];

/// How long one `ip`/`nsenter` call may take, and a node's namespaces to appear.
const NET_TIMEOUT: Duration = Duration::from_secs(10);

/// The node's program: take the node's hostname, wait until the fixture has given the network
/// namespace its address (the file `$2` appears), then run slurmd (`$3 -D -f $4 -N $1`) beside
/// the process that holds the namespaces.
pub(super) const NODE_SCRIPT: &str = r#"
hostname "$1" || exit 1
n=0
while [ ! -e "$2" ]; do
    n=$((n + 1))
    if [ "$n" -gt 1500 ]; then
        echo "the network of node $1 was never set up" >&2
        exit 1
    fi
    sleep 0.02
done
"$3" -D -f "$4" -N "$1" &
exec sleep infinity
"#;

/// The fixture's bridge and subnet.
#[derive(Debug, Clone)]
pub(super) struct Network {
    bridge: String,
    prefix: [u8; 3],
    ip: std::path::PathBuf,
    nsenter: std::path::PathBuf,
}

impl Network {
    /// Creates the bridge on a free /24 and writes `DIR/run/teardown`, the command the keeper
    /// runs to remove it.
    pub async fn create(dir: &Path) -> anyhow::Result<Network> {
        let ip = find_binary("ip", &[Path::new("/usr/sbin"), Path::new("/sbin")])?;
        let nsenter = find_binary("nsenter", &[])?;
        let mut last_error = None;
        for attempt in 0..8u64 {
            let seed = random_seed() ^ attempt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let used = run(&ip, &["-4", "-o", "addr", "show"]).await?;
            let prefix = [10, 128 + (seed % 127) as u8, ((seed >> 8) % 256) as u8];
            let net = format!("{}.{}.{}.", prefix[0], prefix[1], prefix[2]);
            if used.contains(&format!(" {net}")) {
                continue;
            }
            let bridge = format!("atb{:06x}", (seed >> 16) & 0xff_ffff);
            if let Err(e) = run(&ip, &["link", "add", &bridge, "type", "bridge"]).await {
                last_error = Some(e);
                continue;
            }
            let network = Network {
                bridge,
                prefix,
                ip,
                nsenter,
            };
            std::fs::create_dir_all(dir.join("run")).context("creating DIR/run")?;
            std::fs::write(
                dir.join("run/teardown"),
                format!("{} link del {}\n", network.ip.display(), network.bridge),
            )
            .context("writing the bridge's teardown")?;
            let cidr = format!("{}/24", network.controller_addr());
            run(
                &network.ip,
                &["addr", "add", &cidr, "dev", network.bridge.as_str()],
            )
            .await?;
            run(&network.ip, &["link", "set", network.bridge.as_str(), "up"]).await?;
            return Ok(network);
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no free 10.x.y.0/24 found")))
            .context("creating the nodes' bridge")
    }

    /// The bridge's name.
    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    /// slurmctld's address: the host's side of the bridge.
    pub fn controller_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.prefix[0], self.prefix[1], self.prefix[2], 1)
    }

    /// The address of node `index` (0-based).
    pub fn node_addr(&self, index: usize) -> Ipv4Addr {
        let host = u8::try_from(11 + index).unwrap_or(u8::MAX);
        Ipv4Addr::new(self.prefix[0], self.prefix[1], self.prefix[2], host)
    }

    /// Gives the namespaces of process `pid` (a node's holder) the interface `eth0` with the
    /// address of node `index`, plugged into the bridge, and `lo`.
    pub async fn attach(&self, pid: u32, index: usize) -> anyhow::Result<()> {
        // Until unshare(2) has run, the process is still in the host's namespace.
        let own = std::fs::read_link("/proc/self/ns/net").context("reading our namespace")?;
        wait::until(
            "the node's process to enter its namespaces",
            NET_TIMEOUT,
            || {
                let own = own.clone();
                async move {
                    let ns = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()?;
                    (ns != own).then_some(())
                }
            },
        )
        .await?;
        let veth = format!("{}n{}", self.bridge, index + 1);
        let pid = pid.to_string();
        let ip = &self.ip;
        run(
            ip,
            &[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &pid,
            ],
        )
        .await?;
        run(ip, &["link", "set", &veth, "master", &self.bridge]).await?;
        run(ip, &["link", "set", &veth, "up"]).await?;
        let cidr = format!("{}/24", self.node_addr(index));
        let inside: [&[&str]; 3] = [
            &["addr", "add", &cidr, "dev", "eth0"],
            &["link", "set", "eth0", "up"],
            &["link", "set", "lo", "up"],
        ];
        for args in inside {
            let mut all = vec!["--target", pid.as_str(), "--net", "--"];
            let ip = ip.to_str().context("ip's path is not UTF-8")?;
            all.push(ip);
            all.extend_from_slice(args);
            run(&self.nsenter, &all).await?;
        }
        Ok(())
    }
}

/// SIGKILLs (with `kill`, the program) every process in the network namespace of `holder`
/// except `holder` itself; returns how many there were.
pub(super) fn kill_namespace(kill: &Path, holder: u32) -> anyhow::Result<usize> {
    let ns = std::fs::read_link(format!("/proc/{holder}/ns/net"))
        .with_context(|| format!("the node's holder {holder} is gone"))?;
    let own = std::fs::read_link("/proc/self/ns/net")?;
    anyhow::ensure!(ns != own, "process {holder} is in the host's namespace");
    let mut killed = std::collections::BTreeSet::new();
    // Twice: a process forked meanwhile is caught by the second round.
    for _ in 0..2 {
        let pids: Vec<String> = std::fs::read_dir("/proc")?
            .flatten()
            .filter_map(|entry| {
                let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
                let theirs = std::fs::read_link(entry.path().join("ns/net")).ok()?;
                (pid != holder && theirs == ns).then(|| pid.to_string())
            })
            .collect();
        if pids.is_empty() {
            break;
        }
        // Some may have exited since: `kill` then fails for those alone.
        let _ = std::process::Command::new(kill)
            .arg("-KILL")
            .args(&pids)
            .stderr(std::process::Stdio::null())
            .status();
        killed.extend(pids);
    }
    Ok(killed.len())
}

async fn run(program: &Path, args: &[&str]) -> anyhow::Result<String> {
    output_of(
        program,
        args,
        std::iter::empty::<(&str, &str)>(),
        None,
        NET_TIMEOUT,
    )
    .await
}

/// Enough randomness to pick a subnet and a bridge name that parallel tests do not share.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}
