-- A session's GPU request stored as what it is rather than as `--gres` text: the kind
-- of slice ('gpu': whole GPUs or MIG instances; 'shard': shares of a GPU; NULL: none),
-- the GPU type or MIG profile asked for (NULL: any), and how many. The pages and the
-- API print it as `--gres` spells it (`gpu:2`, `gpu:1g.10gb:1`, `shard:2`).
-- Existing rows are converted from the `gres` column, which goes.

ALTER TABLE sessions ADD COLUMN gpu_kind TEXT CHECK (gpu_kind IN ('gpu', 'shard'));
ALTER TABLE sessions ADD COLUMN gpu_type TEXT;
ALTER TABLE sessions ADD COLUMN gpu_count BIGINT NOT NULL DEFAULT 0;

-- `gres` is '' (none), 'gpu:N', 'gpu:TYPE:N' or 'shard:N' (the only forms sessions wrote).
UPDATE sessions SET
    gpu_kind = NULLIF(split_part(gres, ':', 1), ''),
    gpu_type = CASE WHEN split_part(gres, ':', 3) <> '' THEN split_part(gres, ':', 2) END,
    gpu_count = CASE
        WHEN split_part(gres, ':', 3) <> '' THEN split_part(gres, ':', 3)::BIGINT
        WHEN gres <> '' THEN split_part(gres, ':', 2)::BIGINT
        ELSE 0
    END;

ALTER TABLE sessions DROP COLUMN gres;
