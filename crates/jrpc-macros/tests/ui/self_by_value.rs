#[jrpc::rpc]
trait Service {
    fn take(self) -> Result<i64, jrpc::Error>;
}

fn main() {}
