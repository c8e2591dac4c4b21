//! OCI images with podman (rootless, run as the user) or docker (a root daemon):
//! `<engine> run --rm --init --name atrium-<job> …` with the user's identity in
//! the container, the host's network, the home, working directory, mounts and
//! script bound at their paths, and only the allocated GPUs.
//!
//! The environment never appears in argv (it may hold secrets):
//! - podman runs as the user with the job's environment, and `-e NAME` (no value)
//!   copies each variable from it into the container;
//! - docker's client runs as root, so it starts with a fixed environment (a user's
//!   `PATH`, `LD_PRELOAD`, `DOCKER_HOST` or `DOCKER_CONFIG` must not steer a root
//!   process), and reads the job's variables from `--env-file`, written by the
//!   trampoline (root, 0600). That format has one variable a line: variables whose
//!   value holds a line break, or whose name it cannot carry, are left out.
//!
//! GPUs are selected by the engine (CDI names for podman, `--gpus` for docker), and
//! the container numbers them from 0, so `CUDA_VISIBLE_DEVICES` is renumbered.
//!
//! Stopping: the supervisor signals the client's process group; the client forwards
//! the signal to the container (podman's default, docker's `--sig-proxy=true`), and
//! `--init` passes it on to the script. If the client is killed at the end of the
//! grace time the container could outlive it, so the supervisor then removes it by
//! name (`cleanup_argv`).
//! Must not touch: anything but the command line and its environment.

use super::{
    binds, check_image_and_paths, container_name, renumber_gpus, script_command, ContainerRuntime,
    Host, StepFiles,
};
use crate::launch::StepSpec;

/// `PATH` of docker's client (it runs as root).
const ROOT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Options both engines share: working directory and binds.
fn workdir_and_volumes(spec: &StepSpec, files: &StepFiles) -> Vec<String> {
    let home = spec.home.display().to_string();
    let mut a = vec![
        "-w".to_string(),
        spec.workdir.display().to_string(),
        "-v".into(),
        format!("{home}:{home}"),
    ];
    for b in binds(spec, &files.script) {
        a.push("-v".into());
        a.push(b.spec());
    }
    a
}

pub(crate) struct Podman;

impl ContainerRuntime for Podman {
    fn name(&self) -> &'static str {
        "podman"
    }

    fn programs(&self) -> &'static [&'static str] {
        &["podman"]
    }

    fn runs_host_root(&self) -> bool {
        false
    }

    fn check(&self, spec: &StepSpec) -> Result<(), String> {
        check_image_and_paths(self, spec, &[':'])
    }

    /// `podman run --rm --init --name atrium-<job> --userns=keep-id --user UID:GID
    /// [--group-add keep-groups] --cgroups=disabled --network host -w WORKDIR
    /// -v HOME:HOME [-v WORKDIR:WORKDIR] -v SRC:DST[:ro]… -v SCRIPT:SCRIPT:ro
    /// -e NAME… [--device nvidia.com/gpu=N…] IMAGE <script command>`.
    ///
    /// `keep-id` maps the user to themselves; `keep-groups` keeps their
    /// supplementary groups (for shared storage). `--cgroups=disabled` leaves the
    /// container in the step's own cgroup, where the supervisor enforces the
    /// memory limit and kills what is left at the end; a rootless podman could not
    /// create cgroups of its own on most machines anyway.
    fn argv(&self, spec: &StepSpec, files: &StepFiles, host: &Host) -> Vec<String> {
        let mut a: Vec<String> = vec![
            host.program(self),
            "run".into(),
            "--rm".into(),
            "--init".into(),
            "--name".into(),
            container_name(spec),
            "--userns=keep-id".into(),
            "--user".into(),
            format!("{}:{}", spec.uid, spec.gid),
        ];
        if spec.groups.iter().any(|g| *g != spec.gid) {
            a.extend(["--group-add".into(), "keep-groups".into()]);
        }
        a.extend([
            "--cgroups=disabled".into(),
            "--network".into(),
            "host".into(),
        ]);
        a.extend(workdir_and_volumes(spec, files));
        for (name, _) in &spec.env {
            a.extend(["-e".into(), name.clone()]);
        }
        for i in &spec.gpu_indices {
            a.extend(["--device".into(), format!("nvidia.com/gpu={i}")]);
        }
        a.push(spec.image.clone().unwrap_or_default());
        a.extend(script_command(spec, &files.script));
        a
    }

    /// The job's environment, which `-e NAME` copies into the container.
    fn env(&self, spec: &StepSpec, _host: &Host) -> Vec<(String, String)> {
        renumber_gpus(&spec.env)
    }

    fn cleanup_argv(&self, spec: &StepSpec, host: &Host) -> Option<Vec<String>> {
        Some(vec![
            host.program(self),
            "rm".into(),
            "--force".into(),
            "--time".into(),
            "0".into(),
            container_name(spec),
        ])
    }
}

pub(crate) struct Docker;

impl ContainerRuntime for Docker {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn programs(&self) -> &'static [&'static str] {
        &["docker"]
    }

    /// The client talks to the daemon there (its environment is fixed, so no
    /// `DOCKER_HOST` can point it elsewhere).
    fn requires(&self) -> &'static [(&'static str, &'static str)] {
        &[("/var/run/docker.sock", "the docker daemon's socket")]
    }

    fn runs_host_root(&self) -> bool {
        false
    }

    fn needs_root_client(&self) -> bool {
        true
    }

    fn check(&self, spec: &StepSpec) -> Result<(), String> {
        check_image_and_paths(self, spec, &[':'])
    }

    /// `docker run --rm --init --sig-proxy=true --name atrium-<job> --user UID:GID
    /// [--group-add G…] --security-opt no-new-privileges --cap-drop ALL
    /// --network host [--memory Nm --memory-swap Nm] -w WORKDIR -v HOME:HOME
    /// [-v WORKDIR:WORKDIR] -v SRC:DST[:ro]… -v SCRIPT:SCRIPT:ro --env-file FILE
    /// [--gpus "device=N,M"] IMAGE <script command>`.
    ///
    /// The daemon is root and the container shares the host's user ids, so the
    /// job runs as the user with their groups, no capabilities and no way to gain
    /// privileges (a setuid binary of the image would otherwise be root on the
    /// bound storage). `--sig-proxy=true` is docker's default, stated because
    /// stopping depends on it. The container runs in docker's cgroup, not the
    /// step's, so the memory limit is given to docker (no swap, as in the step's
    /// cgroup); a container killed for memory ends with code 137. `--gpus` parses
    /// its value as CSV, hence the quotes inside it.
    fn argv(&self, spec: &StepSpec, files: &StepFiles, host: &Host) -> Vec<String> {
        let mut a: Vec<String> = vec![
            host.program(self),
            "run".into(),
            "--rm".into(),
            "--init".into(),
            "--sig-proxy=true".into(),
            "--name".into(),
            container_name(spec),
            "--user".into(),
            format!("{}:{}", spec.uid, spec.gid),
        ];
        for g in spec.groups.iter().filter(|g| **g != spec.gid) {
            a.extend(["--group-add".into(), g.to_string()]);
        }
        a.extend([
            "--security-opt".into(),
            "no-new-privileges".into(),
            "--cap-drop".into(),
            "ALL".into(),
            "--network".into(),
            "host".into(),
        ]);
        if let Some(mb) = spec.memory_limit_mb {
            a.extend([
                "--memory".into(),
                format!("{mb}m"),
                "--memory-swap".into(),
                format!("{mb}m"),
            ]);
        }
        a.extend(workdir_and_volumes(spec, files));
        a.extend(["--env-file".into(), files.env_file.display().to_string()]);
        if !spec.gpu_indices.is_empty() {
            let devices: Vec<String> = spec.gpu_indices.iter().map(|i| i.to_string()).collect();
            a.extend(["--gpus".into(), format!("\"device={}\"", devices.join(","))]);
        }
        a.push(spec.image.clone().unwrap_or_default());
        a.extend(script_command(spec, &files.script));
        a
    }

    fn env(&self, _spec: &StepSpec, _host: &Host) -> Vec<(String, String)> {
        vec![("PATH".into(), ROOT_PATH.into())]
    }

    /// `NAME=value` lines, as `docker run --env-file` reads them.
    fn env_file(&self, spec: &StepSpec) -> Option<String> {
        let mut out = String::new();
        for (name, value) in renumber_gpus(&spec.env) {
            let name_ok = !name.is_empty()
                && !name.starts_with('#')
                && !name.contains(|c: char| c == '=' || c.is_whitespace());
            if name_ok && !value.contains(['\n', '\r']) {
                out.push_str(&format!("{name}={value}\n"));
            }
        }
        Some(out)
    }

    fn cleanup_argv(&self, spec: &StepSpec, host: &Host) -> Option<Vec<String>> {
        Some(vec![
            host.program(self),
            "rm".into(),
            "--force".into(),
            container_name(spec),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{files, host, mounts, spec};
    use super::*;
    use crate::launch::RuntimeKind;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn job_env() -> Vec<(String, String)> {
        env(&[
            ("HOME", "/home/alice"),
            ("CUDA_VISIBLE_DEVICES", "1,3"),
            ("WANDB_API_KEY", "secret"),
        ])
    }

    #[test]
    fn podman_with_gpus_groups_and_mounts() {
        let mut s = spec(RuntimeKind::Podman, vec![1, 3]);
        s.groups = vec![20001, 30000];
        s.image = Some("nvcr.io/nvidia/pytorch:24.01-py3".into());
        s.mounts = mounts();
        s.env = job_env();
        let argv = Podman.argv(&s, &files(), &host("/usr/bin/podman"));
        assert_eq!(
            argv.join(" "),
            "/usr/bin/podman run --rm --init --name atrium-7 --userns=keep-id \
             --user 20001:20001 --group-add keep-groups --cgroups=disabled --network host \
             -w /scratch/alice/run -v /home/alice:/home/alice \
             -v /scratch/alice/run:/scratch/alice/run -v /srv/datasets:/datasets:ro \
             -v /srv/projects/vision:/projects/vision \
             -v /spool/7/slurm_script:/spool/7/slurm_script:ro \
             -e HOME -e CUDA_VISIBLE_DEVICES -e WANDB_API_KEY \
             --device nvidia.com/gpu=1 --device nvidia.com/gpu=3 \
             nvcr.io/nvidia/pytorch:24.01-py3 /spool/7/slurm_script"
        );
        assert!(!argv.concat().contains("secret"));
        assert_eq!(
            Podman.env(&s, &host("/usr/bin/podman")),
            env(&[
                ("HOME", "/home/alice"),
                ("CUDA_VISIBLE_DEVICES", "0,1"),
                ("WANDB_API_KEY", "secret"),
            ])
        );
    }

    #[test]
    fn podman_without_gpus_in_the_home() {
        let mut s = spec(RuntimeKind::Podman, vec![]);
        s.workdir = "/home/alice/run".into();
        s.script = "echo hi\n".into();
        s.image = Some("docker.io/library/python:3.12".into());
        assert_eq!(
            Podman.argv(&s, &files(), &host("/usr/bin/podman")),
            [
                "/usr/bin/podman",
                "run",
                "--rm",
                "--init",
                "--name",
                "atrium-7",
                "--userns=keep-id",
                "--user",
                "20001:20001",
                "--cgroups=disabled",
                "--network",
                "host",
                "-w",
                "/home/alice/run",
                "-v",
                "/home/alice:/home/alice",
                "-v",
                "/spool/7/slurm_script:/spool/7/slurm_script:ro",
                "docker.io/library/python:3.12",
                "/bin/sh",
                "/spool/7/slurm_script",
            ]
        );
        assert_eq!(
            Podman.cleanup_argv(&s, &host("/usr/bin/podman")),
            Some(
                [
                    "/usr/bin/podman",
                    "rm",
                    "--force",
                    "--time",
                    "0",
                    "atrium-7"
                ]
                .map(String::from)
                .to_vec()
            )
        );
    }

    #[test]
    fn docker_with_gpus_groups_and_mounts() {
        let mut s = spec(RuntimeKind::Docker, vec![0, 2]);
        s.groups = vec![20001, 30000, 30001];
        s.image = Some("nvcr.io/nvidia/pytorch:24.01-py3".into());
        s.mounts = mounts();
        s.memory_limit_mb = Some(98304);
        s.env = job_env();
        let argv = Docker.argv(&s, &files(), &host("/usr/bin/docker"));
        assert_eq!(
            argv.join(" "),
            "/usr/bin/docker run --rm --init --sig-proxy=true --name atrium-7 \
             --user 20001:20001 --group-add 30000 --group-add 30001 \
             --security-opt no-new-privileges --cap-drop ALL --network host \
             --memory 98304m --memory-swap 98304m \
             -w /scratch/alice/run -v /home/alice:/home/alice \
             -v /scratch/alice/run:/scratch/alice/run -v /srv/datasets:/datasets:ro \
             -v /srv/projects/vision:/projects/vision \
             -v /spool/7/slurm_script:/spool/7/slurm_script:ro \
             --env-file /spool/7/container.env --gpus \"device=0,2\" \
             nvcr.io/nvidia/pytorch:24.01-py3 /spool/7/slurm_script"
        );
        assert!(!argv.concat().contains("secret"));
    }

    #[test]
    fn docker_without_gpus_in_the_home() {
        let mut s = spec(RuntimeKind::Docker, vec![]);
        s.workdir = "/home/alice/run".into();
        s.image = Some("docker.io/library/python:3.12".into());
        assert_eq!(
            Docker.argv(&s, &files(), &host("/usr/local/bin/docker")),
            [
                "/usr/local/bin/docker",
                "run",
                "--rm",
                "--init",
                "--sig-proxy=true",
                "--name",
                "atrium-7",
                "--user",
                "20001:20001",
                "--security-opt",
                "no-new-privileges",
                "--cap-drop",
                "ALL",
                "--network",
                "host",
                "-w",
                "/home/alice/run",
                "-v",
                "/home/alice:/home/alice",
                "-v",
                "/spool/7/slurm_script:/spool/7/slurm_script:ro",
                "--env-file",
                "/spool/7/container.env",
                "docker.io/library/python:3.12",
                "/spool/7/slurm_script",
            ]
        );
        assert_eq!(
            Docker.cleanup_argv(&s, &host("/usr/local/bin/docker")),
            Some(
                ["/usr/local/bin/docker", "rm", "--force", "atrium-7"]
                    .map(String::from)
                    .to_vec()
            )
        );
    }

    #[test]
    fn docker_reads_the_environment_from_a_file_and_starts_clean() {
        let mut s = spec(RuntimeKind::Docker, vec![1, 3]);
        s.env = job_env();
        s.env.extend(env(&[
            ("BASH_FUNC_f%%", "() {  echo hi\n}"),
            ("SPACES", "  kept  "),
            ("LD_PRELOAD", "/home/alice/evil.so"),
        ]));
        assert_eq!(
            Docker.env_file(&s).as_deref(),
            Some(
                "HOME=/home/alice\nCUDA_VISIBLE_DEVICES=0,1\nWANDB_API_KEY=secret\n\
                 SPACES=  kept  \nLD_PRELOAD=/home/alice/evil.so\n"
            )
        );
        assert_eq!(
            Docker.env(&s, &host("/usr/bin/docker")),
            env(&[("PATH", ROOT_PATH)])
        );
        assert!(Docker.needs_root_client());
        assert!(!Podman.needs_root_client());
    }
}
