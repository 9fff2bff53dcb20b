//! Request parsing and result references: any octets go through
//! `fastview::jmap::request::Request::parse`; for a valid request, every
//! call's arguments are resolved with `fastview::jmap::reference::resolve`
//! against the earlier calls' arguments (as if each call echoed them, like
//! Core/echo), exactly as dispatch does. Errors are serialised as they would
//! be sent.

#![no_main]

use fastview::jmap::reference::resolve;
use fastview::jmap::request::{Invocation, Request};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let request = match Request::parse(data, 64) {
        Ok(request) => request,
        Err(error) => {
            let problem = error.problem();
            assert!(
                problem["status"]
                    .as_u64()
                    .is_some_and(|s| s == 400 || s == 413)
            );
            let _ = problem.to_string();
            return;
        }
    };
    assert!(request.method_calls.len() <= 64);
    let mut responses: Vec<(String, Value, String)> = Vec::new();
    for Invocation(method, mut arguments, call_id) in request.method_calls {
        match resolve(&mut arguments, &responses) {
            Ok(()) => responses.push((method, Value::Object(arguments), call_id)),
            Err(error) => {
                let json = error.to_json();
                assert!(
                    json["description"]
                        .as_str()
                        .is_some_and(|d| d.len() <= 1024)
                );
                responses.push(("error".into(), json, call_id));
            }
        }
    }
    // The response serialises, as the server would send it.
    let _ = serde_json::to_string(&responses).expect("serialises");
});
