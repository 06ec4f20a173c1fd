-- 30: a session's user messages by seq. Whether a user message came after
-- an approval was asked (it then expires) and the newest user message of
-- a session (an approval's epoch) walked the session's entries from the
-- approval on: in a session where no person writes (a routine's, a
-- hook's, a room member's) that was every entry after it, for each
-- approval read (200 ms for a page of 100 approvals in a session of
-- 20,000 entries, and a writer stall per approval asked). Only user
-- messages enter this index. Built once over the stored entries when the
-- migration runs (a few seconds for millions of entries).
CREATE INDEX entries_user_message ON entries(session_id, seq)
    WHERE kind = 'user_message';
