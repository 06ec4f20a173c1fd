-- 4: approvals and review decisions (issue 5)
-- (reserved; filled in by the feature)
SELECT 1;
