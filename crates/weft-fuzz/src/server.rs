//! `server_request`: weft-server's request bodies (the chat API and the runs API).

/// Any bytes as the body of every request the server reads: the chat request, a run request
/// (with zero, one and two pending decisions), and each thread API body; and as the query
/// of a run stream. Never a panic or a 5xx: a bad body is 400, 409 or 422; an empty body
/// of the runs and threads API is the default request; reading is deterministic.
pub fn server_request(data: &[u8]) {
    match weft_server::fuzzing::chat_request(data) {
        Ok(read) => {
            let again = weft_server::fuzzing::chat_request(data).expect("reads again");
            assert_eq!(read, again);
        }
        Err(error) => assert!(
            matches!(error.status.as_u16(), 400 | 409),
            "chat: {error:?}"
        ),
    }
    let blank = data.iter().all(u8::is_ascii_whitespace);
    let pendings: [&[String]; 3] = [
        &[],
        &["d-1".to_owned()],
        &["d-1".to_owned(), "d-2".to_owned()],
    ];
    for pending in pendings {
        match weft_server::fuzzing::run_request(data, pending) {
            Ok(_) => {}
            Err(error) => {
                assert!(!blank, "an empty run request is the default one: {error:?}");
                assert!(
                    matches!(error.status.as_u16(), 400 | 409 | 422),
                    "run: {error:?}"
                );
            }
        }
    }
    for kind in 0..6 {
        match weft_server::fuzzing::thread_request(kind, data) {
            Ok(()) => {}
            Err(error) => {
                assert!(!blank, "an empty thread request is the default one");
                assert!(
                    matches!(error.status.as_u16(), 400 | 422),
                    "thread {kind}: {error:?}"
                );
            }
        }
    }
    let text = String::from_utf8_lossy(data);
    for (key, value) in weft_server::fuzzing::query(&text) {
        let _ = (key.len(), value.len());
    }
}
