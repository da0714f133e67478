#[jrpc::rpc]
trait Service {
    fn count(&self) -> u64;
}

fn main() {}
