-- 8: the newest compaction summary of a session without a scan. A tail
-- load asks for it (`kind = 'summary' ORDER BY seq DESC LIMIT 1`); without
-- this index SQLite walks every entry of the session backwards, so the read
-- grew with the session. Partial: only summary rows are in it, so appending
-- any other entry costs nothing more.
CREATE INDEX entries_summary ON entries(session_id, seq) WHERE kind = 'summary';
