-- A session's GPU request stored as what it is rather than as `--gres` text: the kind
-- of slice ('gpu': whole GPUs or MIG instances; 'shard': shares of a GPU; NULL: none),
-- the GPU type or MIG profile asked for (NULL: any), and how many. The pages and the
-- API print it as `--gres` spells it (`gpu:2`, `gpu:1g.10gb:1`, `shard:2`).
-- Existing rows are converted from the `gres` column, which goes.

ALTER TABLE sessions ADD COLUMN gpu_kind TEXT CHECK (gpu_kind IN ('gpu', 'shard'));
ALTER TABLE sessions ADD COLUMN gpu_type TEXT;
ALTER TABLE sessions ADD COLUMN gpu_count INTEGER NOT NULL DEFAULT 0;

-- `gres` is '' (none), 'gpu:N', 'gpu:TYPE:N' or 'shard:N' (the only forms sessions wrote).
UPDATE sessions SET
    gpu_kind = CASE
        WHEN gres LIKE 'gpu:%' THEN 'gpu'
        WHEN gres LIKE 'shard:%' THEN 'shard'
    END,
    gpu_type = CASE
        WHEN gres LIKE 'gpu:%:%' THEN substr(gres, 5, instr(substr(gres, 5), ':') - 1)
    END,
    gpu_count = CASE
        WHEN gres LIKE 'gpu:%:%' THEN CAST(substr(substr(gres, 5), instr(substr(gres, 5), ':') + 1) AS INTEGER)
        WHEN gres LIKE 'gpu:%' THEN CAST(substr(gres, 5) AS INTEGER)
        WHEN gres LIKE 'shard:%' THEN CAST(substr(gres, 7) AS INTEGER)
        ELSE 0
    END;

ALTER TABLE sessions DROP COLUMN gres;
