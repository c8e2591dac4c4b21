//! A GPU request as Slurm's `--gres` spells it (`gpu:2`, `gpu:a100:1`,
//! `gpu:1g.10gb:1`, `shard:2`): how the pages, the API and `sbatch` print one.

use scheduler::{GpuRequest, SliceKind};

/// `gpu[:type]:N` or `shard:N`.
pub fn text(request: &GpuRequest) -> String {
    match &request.kind {
        SliceKind::Gpu { r#type: None } => format!("gpu:{}", request.count),
        SliceKind::Gpu { r#type: Some(t) } => format!("gpu:{t}:{}", request.count),
        SliceKind::Shard => format!("shard:{}", request.count),
    }
}

/// [`text`] of a request, empty for none.
pub fn text_of(request: Option<&GpuRequest>) -> String {
    request.map(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler::GpuPer;

    #[test]
    fn gres_reads_back_as_written() {
        for written in ["gpu:2", "gpu:a100:1", "gpu:1g.10gb:3", "shard:4"] {
            let parsed = scheduler::parse_args(&[format!("--gres={written}")])
                .ok()
                .and_then(|r| r.gpus);
            assert_eq!(parsed.as_ref().map(text).as_deref(), Some(written));
        }
        let none: Option<&GpuRequest> = None;
        assert_eq!(text_of(none), "");
        let one = GpuRequest {
            kind: SliceKind::Shard,
            count: 1,
            per: GpuPer::Node,
        };
        assert_eq!(text_of(Some(&one)), "shard:1");
    }
}
