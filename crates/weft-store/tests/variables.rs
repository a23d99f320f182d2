//! Thread variables and variable requests, on SQLite and PostgreSQL: secrets encrypted at
//! rest (the database file never holds the plain text), the key file made with mode 0600, a
//! secret read back redacted from every event, requests completed once.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use serde_json::json;
use weft_store::{
    EventLog, EventQuery, NewEvent, RequestStatus, SecretKey, Store, ThreadVariables, VariableKind,
    VariableRequests,
};

const SECRET: &str = "s3cr3t-value-for-the-test";

async fn values_round_trip(store: &Store) {
    store
        .set_variable("th-1", "REGION", "eu-west-1", VariableKind::Text)
        .await
        .unwrap();
    store
        .set_variable("th-1", "API_TOKEN", SECRET, VariableKind::Secret)
        .await
        .unwrap();
    // A second set replaces the value (and may change the kind).
    store
        .set_variable("th-1", "REGION", "us-east-2", VariableKind::Text)
        .await
        .unwrap();
    let listed = store.thread_variables("th-1").await.unwrap();
    let names: Vec<_> = listed.iter().map(|v| (v.name.as_str(), v.kind)).collect();
    assert_eq!(
        names,
        [
            ("API_TOKEN", VariableKind::Secret),
            ("REGION", VariableKind::Text)
        ]
    );
    let values = store.variable_values("th-1").await.unwrap();
    assert_eq!(values["REGION"].value, "us-east-2");
    assert_eq!(values["API_TOKEN"].value, SECRET);
    assert!(
        !format!("{values:?}").contains(SECRET),
        "Debug hides secrets"
    );
    assert!(store.variable_values("th-2").await.unwrap().is_empty());
    // An event that repeats the secret is stored without it.
    store
        .append_event(NewEvent {
            event_type: "tool_result".into(),
            run_id: "run-v".into(),
            thread_id: "th-1".into(),
            agent_id: "a".into(),
            turn: 1,
            tool_call_id: None,
            payload: json!({"result": format!("the token is {SECRET}")}),
            seq: None,
            timestamp: None,
        })
        .await
        .unwrap();
    store.flush().await.unwrap();
    let events = store
        .events(&EventQuery {
            run_id: Some("run-v".into()),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    assert!(!events[0].payload.to_string().contains(SECRET));
    assert!(store.unset_variable("th-1", "REGION").await.unwrap());
    assert!(!store.unset_variable("th-1", "REGION").await.unwrap());
    assert!(
        store
            .set_variable("th-1", "BAD-NAME", "x", VariableKind::Text)
            .await
            .is_err()
    );
}

async fn requests_complete_once(store: &Store) {
    let payload = json!({"arguments": {"task": "index the docs"}, "tool": "researcher"});
    let request = store
        .create_variable_request("parent-1", "researcher", &payload, &["DB_URL".to_owned()])
        .await
        .unwrap();
    assert!(request.id.starts_with("vr-"));
    let read = store
        .variable_request("parent-1", &request.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.payload, payload);
    assert_eq!(read.missing, ["DB_URL"]);
    assert_eq!(read.status, RequestStatus::Pending);
    // Another thread does not see it.
    assert!(
        store
            .variable_request("parent-2", &request.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .complete_variable_request("parent-1", &request.id)
            .await
            .unwrap()
    );
    assert!(
        !store
            .complete_variable_request("parent-1", &request.id)
            .await
            .unwrap()
    );
    let done = store
        .variable_request("parent-1", &request.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.status, RequestStatus::Completed);
    assert!(done.completed_at.is_some());
}

#[tokio::test]
async fn sqlite_secrets_are_encrypted_in_the_file_with_a_private_key_file() {
    let h = common::sqlite().await.unwrap();
    values_round_trip(&h.store).await;
    requests_complete_once(&h.store).await;
    h.store.flush().await.unwrap();
    let dir = h._dir.as_ref().unwrap().path().to_owned();
    // The key file was created beside the database, readable by its owner only.
    let key_file = dir.join(weft_store::SECRET_KEY_FILE);
    let key = std::fs::read_to_string(&key_file).unwrap();
    assert!(SecretKey::from_base64(&key).is_ok());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // No file of the database holds the plain text (the WAL included).
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(SECRET));
    }
    // Another process (a new store on the file) reads the secret with the key file.
    let again = Store::open(&h.url).await.unwrap();
    assert_eq!(
        again.variable_values("th-1").await.unwrap()["API_TOKEN"].value,
        SECRET
    );
    // Without the key file the secret cannot be read, and the error says what to do.
    std::fs::remove_file(&key_file).unwrap();
    let keyless = Store::open(&h.url).await.unwrap();
    let error = keyless.variable_values("th-1").await.unwrap_err();
    assert!(error.to_string().contains("WEFT_SECRET_KEY"), "{error}");
    // With a wrong key it does not decrypt.
    keyless.set_secret_key(SecretKey::generate().unwrap());
    assert!(keyless.variable_values("th-1").await.is_err());
    h.finish().await;
}

#[tokio::test]
async fn postgres_secrets_are_encrypted_and_requests_complete_once() {
    let Some(h) = common::postgres().await else {
        return;
    };
    // A PostgreSQL store has no folder for a key file: without a key a secret is refused.
    let error = h
        .store
        .set_variable("th-1", "API_TOKEN", SECRET, VariableKind::Secret)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("WEFT_SECRET_KEY"), "{error}");
    h.store.set_secret_key(SecretKey::generate().unwrap());
    values_round_trip(&h.store).await;
    requests_complete_once(&h.store).await;
    h.finish().await;
}
