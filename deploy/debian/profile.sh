# /etc/profile.d/atrium.sh (the Debian package): atrium's Slurm-style commands
# (sbatch, salloc, srun, squeue, sinfo, scancel, sacct, scontrol, sprio, sshare, sstat,
# seff: links to /usr/bin/atrium) on every login
# shell's PATH. Last on it, so that a Slurm client installed on this machine keeps
# its own commands; `atrium sbatch …` always works.
case ":${PATH}:" in
    *:/usr/lib/atrium/bin:*) ;;
    *) PATH="${PATH:+$PATH:}/usr/lib/atrium/bin"; export PATH ;;
esac
