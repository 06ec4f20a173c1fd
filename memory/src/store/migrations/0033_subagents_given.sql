-- 33: whose words a subagent's task is, and where in the session it came
-- from it was given. At an owner change the task session is read by the
-- bot's new owner from the change on unless the task is theirs to read
-- (`Writer::floor_task_of_unread_origin`): they gave it (`given_by`, the
-- owner of the session it came from when it was given), or they read the
-- part of that session where it was given (`given_seq`, the newest seq
-- there when it was given, at or past the session's floor for them). A
-- task a routine its former owner made through the API gave was read by
-- the new owner whole, the routine's session going to them read from the
-- change on.
ALTER TABLE subagents ADD COLUMN given_by TEXT;
ALTER TABLE subagents ADD COLUMN given_seq INTEGER;
-- the rows already stored, where both are certain: the session the task
-- came from is its parent's owner's and no owner change floored it (so
-- that owner gave the task), and the newest seq there when the subagent
-- was made (the Task call is written before its tool runs). Elsewhere
-- NULL: such a task is judged by the session's owner alone, as before.
UPDATE subagents SET
    given_by = (SELECT s.owner FROM sessions s WHERE s.id = subagents.parent_session),
    given_seq = (SELECT MAX(e.seq) FROM entries e
                 WHERE e.session_id = subagents.parent_session
                   AND e.created_at <= subagents.created_at)
WHERE EXISTS (SELECT 1 FROM sessions s JOIN bots b ON b.id = subagents.parent
              WHERE s.id = subagents.parent_session AND s.owner = b.owner)
  AND NOT EXISTS (SELECT 1 FROM session_floors f
                  WHERE f.session_id = subagents.parent_session);
