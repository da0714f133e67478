//! In-process request → response on one core, no transport: jrpc's
//! `Router::handle`, jsonrpsee's `RpcModule::raw_json_request`, and a
//! serde_json floor doing the least any server must (parse the envelope
//! with raw params, look the method up, decode `(i64, i64)`, serialize the
//! reply).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

const REQUEST: &str = r#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}"#;
/// Calls per timing.
const CALLS: u32 = 200_000;

/// Nanoseconds per call of each path, one timing each: (jrpc, jsonrpsee, floor).
pub async fn time_once() -> (f64, f64, f64) {
    let router = crate::servers::jrpc_router();
    let module = crate::servers::jsonrpsee_module();
    let floor = Floor::new();

    // Warm up and check that all three give the same answer.
    let ours = router.handle(REQUEST.as_bytes()).await.expect("a reply");
    let (theirs, _) = module.raw_json_request(REQUEST, 1).await.expect("a reply");
    let mut reply = Vec::new();
    floor.handle(REQUEST.as_bytes(), &mut reply);
    for answer in [&ours[..], theirs.get().as_bytes(), &reply[..]] {
        let value: serde_json::Value = serde_json::from_slice(answer).expect("JSON");
        assert_eq!(value["result"], 3, "{}", String::from_utf8_lossy(answer));
    }

    let start = Instant::now();
    for _ in 0..CALLS {
        black_box(router.handle(black_box(REQUEST.as_bytes())).await);
    }
    let jrpc = per_call(start);
    let start = Instant::now();
    for _ in 0..CALLS {
        black_box(module.raw_json_request(black_box(REQUEST), 1).await.ok());
    }
    let jsonrpsee = per_call(start);
    let start = Instant::now();
    for _ in 0..CALLS {
        reply.clear();
        floor.handle(black_box(REQUEST.as_bytes()), &mut reply);
        black_box(&reply);
    }
    (jrpc, jsonrpsee, per_call(start))
}

fn per_call(start: Instant) -> f64 {
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[allow(dead_code)]
    jsonrpc: &'a str,
    method: &'a str,
    #[serde(borrow)]
    params: &'a RawValue,
    #[serde(borrow)]
    id: &'a RawValue,
}

#[derive(Serialize)]
struct Reply<'a> {
    jsonrpc: &'static str,
    result: i64,
    id: &'a RawValue,
}

type Method = fn(&RawValue) -> i64;

struct Floor {
    methods: HashMap<&'static str, Method>,
}

impl Floor {
    fn new() -> Floor {
        let add: Method = |params| {
            let (a, b): (i64, i64) = serde_json::from_str(params.get()).unwrap_or((0, 0));
            a + b
        };
        Floor {
            methods: HashMap::from([("add", add)]),
        }
    }

    fn handle(&self, request: &[u8], out: &mut Vec<u8>) {
        let Ok(envelope) = serde_json::from_slice::<Envelope>(request) else {
            return;
        };
        let Some(method) = self.methods.get(envelope.method) else {
            return;
        };
        let result = method(envelope.params);
        let _ = serde_json::to_writer(
            &mut *out,
            &Reply {
                jsonrpc: "2.0",
                result,
                id: envelope.id,
            },
        );
    }
}
