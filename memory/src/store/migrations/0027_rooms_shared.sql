-- 27: the shared rooms, without reading the others. The rooms a user may
-- use are theirs and the shared ones they have a bot in (`rooms_for`,
-- rooms.rs); the read of the candidates, `owner = ? OR shared = 1`,
-- scanned every room of the fleet, every user's private rooms included,
-- at each listing of rooms (`GET /v1/groups`), each search through the
-- API and each SearchTranscript call. A room's row is written when it is
-- made and when its members change, so the index costs nothing per
-- message.
CREATE INDEX rooms_shared ON rooms(shared, id) WHERE shared = 1;
