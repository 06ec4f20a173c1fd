//! The rooms a user may use are read from the user's own and the shared
//! ones, two index searches, not from a scan of every room of the fleet
//! (each user's private rooms included), as `GET /v1/groups`, each API
//! search and each SearchTranscript call read them.
#![allow(clippy::unwrap_used)]

use rusqlite::Connection;
use rusqlite::params;

use super::*;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// 300 rooms of ten owners, one in seven shared.
fn seeded() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    crate::store::schema::migrate(&mut conn).unwrap();
    for i in 0..300_i64 {
        conn.execute(
            "INSERT INTO rooms (id, name, owner, members, shared, created_at, updated_at)
             VALUES (?1, ?1, ?2, ?3, ?4, ?5, ?5)",
            params![
                format!("room-{:03}", (i * 37) % 300),
                format!("user{}", i % 10),
                format!(r#"["b{}","b{}"]"#, i % 10, (i + 3) % 10),
                i % 7 == 0,
                i,
            ],
        )
        .unwrap();
    }
    conn
}

/// Regression (round 32): the read searches `rooms_owner` and the partial
/// index `rooms_shared` (migration 27), never scanning the table; without
/// that index it scanned every room to find the shared ones.
#[test]
fn the_rooms_of_a_user_are_read_through_indexes() -> TestResult {
    let conn = seeded();
    let plan: Vec<String> = conn
        .prepare(&format!(
            "EXPLAIN QUERY PLAN SELECT {ROOM_COLUMNS} FROM rooms {ROOMS_FOR}"
        ))?
        .query_map(params!["user3"], |r| r.get::<_, String>(3))?
        .collect::<rusqlite::Result<_>>()?;
    assert!(
        plan.iter().all(|step| !step.starts_with("SCAN"))
            && plan.iter().any(|s| s.contains("INDEX rooms_owner"))
            && plan.iter().any(|s| s.contains("INDEX rooms_shared")),
        "{plan:?}"
    );
    let rooms = rooms_for(&conn, &UserId::new("user3")?)?;
    assert!(
        rooms
            .iter()
            .all(|r| r.owner.as_str() == "user3" || r.shared)
    );
    assert_eq!(rooms.len(), 30 + 43 - 4);
    assert!(rooms.windows(2).all(|w| w[0].id < w[1].id));
    Ok(())
}
