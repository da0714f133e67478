//! `#[jrpc::rpc]` end to end: one trait of three methods and a notification
//! serves over TCP and WebSocket, its client calls it, and the server calls
//! back its client through a second trait, in both directions; the OpenRPC
//! description follows the trait.

use std::sync::{Arc, Mutex};

use jrpc::server::http::HttpServer;
use jrpc::server::Server;
use jrpc::{CallError, Client, Error, RequestContext, Router};

/// The server's side.
#[jrpc::rpc(namespace = "bank")]
pub trait Bank {
    /// Moves money between accounts.
    ///
    /// Both accounts must exist.
    async fn transfer(&self, from: String, to: String, amount: u64) -> Result<u64, Error>;

    /// Greets whoever calls, asking them their name first.
    async fn greet(&self, cx: RequestContext) -> Result<String, Error>;

    /// The balance of an account.
    #[rpc(name = "balanceOf")]
    fn balance(&self, account: String) -> Result<Option<u64>, Error>;

    /// Writes an audit line.
    #[rpc(notification)]
    fn audit(&self, line: String);
}

/// The client's side: what the server may ask it.
#[jrpc::rpc]
trait Teller {
    /// The caller's name.
    fn name(&self) -> Result<String, Error>;
}

#[derive(Default)]
struct Vault {
    balances: Mutex<Vec<(String, u64)>>,
    audit: Mutex<Vec<String>>,
}

impl Bank for Arc<Vault> {
    async fn transfer(&self, from: String, to: String, amount: u64) -> Result<u64, Error> {
        let mut balances = self.balances.lock().unwrap();
        let position = |name: &str| balances.iter().position(|(n, _)| n == name);
        let (Some(f), Some(t)) = (position(&from), position(&to)) else {
            return Err(Error::new(-32010, "no such account"));
        };
        if balances[f].1 < amount {
            return Err(Error::new(-32011, "insufficient funds"));
        }
        balances[f].1 -= amount;
        balances[t].1 += amount;
        Ok(balances[f].1)
    }

    async fn greet(&self, cx: RequestContext) -> Result<String, Error> {
        let peer = cx
            .peer()
            .ok_or_else(|| Error::new(-32000, "no connection to call back"))?;
        let name = TellerClient::new(&peer)
            .name()
            .await
            .map_err(|e| Error::new(-32000, "callback failed").with_data(&e.to_string()))?;
        Ok(format!("hello, {name}"))
    }

    fn balance(&self, account: String) -> Result<Option<u64>, Error> {
        let balances = self.balances.lock().unwrap();
        Ok(balances.iter().find(|(n, _)| *n == account).map(|(_, b)| *b))
    }

    fn audit(&self, line: String) {
        self.audit.lock().unwrap().push(line);
    }
}

struct Ann;
impl Teller for Ann {
    fn name(&self) -> Result<String, Error> {
        Ok("ann".to_owned())
    }
}

fn vault() -> Arc<Vault> {
    let vault = Arc::new(Vault::default());
    vault
        .balances
        .lock()
        .unwrap()
        .extend([("alice".to_owned(), 100), ("bob".to_owned(), 5)]);
    vault
}

async fn exercise(client: &Client, vault: &Vault) {
    let bank = BankClient::new(client);
    assert_eq!(bank.transfer("alice".into(), "bob".into(), 30).await.unwrap(), 70);
    assert_eq!(bank.balance("bob".into()).await.unwrap(), Some(35));
    assert_eq!(bank.balance("carol".into()).await.unwrap(), None);
    match bank.transfer("bob".into(), "alice".into(), 1000).await {
        Err(CallError::Rpc(e)) => assert_eq!(e.code(), -32011),
        other => panic!("{other:?}"),
    }
    // The server calls back its client mid-request.
    assert_eq!(bank.greet().await.unwrap(), "hello, ann");
    bank.audit("checked".into()).await.unwrap();
    // The notification arrives (the same connection keeps order).
    let _ = bank.balance("alice".into()).await.unwrap();
    assert!(vault.audit.lock().unwrap().contains(&"checked".to_owned()));
}

/// Connects to `url` as a client that answers the server's `Teller`
/// questions, and runs every call.
async fn exercise_at(url: &str, vault: &Vault) {
    let client = Client::builder()
        .router(Ann.into_router())
        .connect(url)
        .await
        .unwrap();
    exercise(&client, vault).await;
}

#[tokio::test]
async fn a_trait_serves_and_calls_over_tcp_both_ways() {
    let vault = vault();
    let serving = Server::new(Arc::clone(&vault).into_router())
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    exercise_at(serving.local_addr(), &vault).await;
    serving.shutdown().await;
}

#[tokio::test]
async fn a_trait_serves_and_calls_over_websocket_both_ways() {
    let vault = vault();
    let serving = HttpServer::new(Arc::clone(&vault).into_router())
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    exercise_at(&serving.local_addr().replace("http://", "ws://"), &vault).await;
    serving.shutdown().await;
}

#[tokio::test]
async fn params_by_name_and_by_position_and_the_description() {
    let router: Router = vault()
        .into_router()
        .discover(jrpc::openrpc::Info::new("bank", "1"));
    for params in [
        r#"["alice","bob",1]"#,
        r#"{"from":"alice","to":"bob","amount":1}"#,
    ] {
        let request = format!(r#"{{"jsonrpc":"2.0","method":"bank.transfer","params":{params},"id":1}}"#);
        let reply = router.handle(request.as_bytes()).await.unwrap();
        let expected = if params.starts_with('[') { 99 } else { 98 };
        assert_eq!(
            String::from_utf8_lossy(&reply),
            format!(r#"{{"jsonrpc":"2.0","result":{expected},"id":1}}"#),
            "{params}"
        );
    }
    let bad = router
        .handle(br#"{"jsonrpc":"2.0","method":"bank.transfer","params":{"from":"alice"},"id":2}"#)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&bad).contains("-32602"));

    let document = router.openrpc();
    let names: Vec<&str> = document.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        ["bank.audit", "bank.balanceOf", "bank.greet", "bank.transfer"]
    );
    let transfer = document.method("bank.transfer").unwrap();
    let params: Vec<&str> = transfer.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(params, ["from", "to", "amount"]);
    assert_eq!(transfer.summary.as_deref(), Some("Moves money between accounts."));
    assert_eq!(
        transfer.description.as_deref(),
        Some("Moves money between accounts.\n\nBoth accounts must exist.")
    );
    assert_eq!(
        transfer.param_structure,
        Some(jrpc::openrpc::ParamStructure::Either)
    );
    // The context is not a param; a notification has no result.
    assert!(document.method("bank.greet").unwrap().params.is_empty());
    assert!(document.method("bank.audit").unwrap().result.is_none());
    let balance = document.method("bank.balanceOf").unwrap();
    assert_eq!(
        balance.result.as_ref().unwrap().schema["type"],
        serde_json::json!(["integer", "null"])
    );
}
