#[jrpc::rpc]
trait Service {
    fn echo<T>(&self, value: T) -> Result<T, jrpc::Error>;
}

fn main() {}
