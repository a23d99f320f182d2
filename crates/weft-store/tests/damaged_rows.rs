//! Rows another program damaged (the store file is a user's SQLite file): one bad row is
//! reported and set aside, and holds up nothing else.
#![allow(clippy::unwrap_used)]

use serde_json::json;
use weft_store::{QueuedTool, SET_ASIDE, ScheduledEffects as _, Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_effect_whose_row_does_not_decode_is_set_aside_and_holds_up_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = Store::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let call = |n: i64| QueuedTool {
        name: "remind".into(),
        arguments: json!({"n": n}),
    };
    let bad = store.schedule_effect("t", &call(1), 1_000).await.unwrap();
    let good = store.schedule_effect("t", &call(2), 2_000).await.unwrap();
    let later = store.schedule_effect("t", &call(3), 9_000).await.unwrap();
    store.flush().await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn.execute(
        "UPDATE scheduled_effects SET tool = '{not json' WHERE id = ?1",
        [&bad.id],
    )
    .unwrap();

    // The listing leaves it out; the soonest effect is still the bad one until a pass
    // reads it.
    assert_eq!(
        store.scheduled_effects("t").await.unwrap(),
        [good.clone(), later.clone()]
    );
    // Due: the good effect comes back, the bad one is set aside (not deleted).
    assert_eq!(
        store.due_effects(5_000, 10).await.unwrap(),
        std::slice::from_ref(&good)
    );
    let due_at: i64 = conn
        .query_row(
            "SELECT due_at FROM scheduled_effects WHERE id = ?1",
            [&bad.id],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(due_at, SET_ASIDE);
    assert_eq!(
        store.due_effects(i64::MAX - 1, 10).await.unwrap(),
        [good, later]
    );
    assert_eq!(store.next_effect_due().await.unwrap(), Some(2_000));
    // A person can still remove it.
    assert!(store.remove_scheduled_effect(&bad.id).await.unwrap());
    let left: i64 = conn
        .query_row("SELECT count(*) FROM scheduled_effects", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(left, 2);
}
