-- 3: memory layers: profile, log, notes (issue 3)
-- (reserved; filled in by the feature)
SELECT 1;
