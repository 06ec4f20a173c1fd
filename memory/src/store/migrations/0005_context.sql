-- 5: token usage per turn, compaction summaries and epochs (issue 3)
-- (reserved; filled in by the feature)
SELECT 1;
