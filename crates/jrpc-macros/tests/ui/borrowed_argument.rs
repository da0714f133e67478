#[jrpc::rpc]
trait Service {
    fn greet(&self, name: &str) -> Result<String, jrpc::Error>;
}

fn main() {}
