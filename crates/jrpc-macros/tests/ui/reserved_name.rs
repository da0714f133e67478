#[jrpc::rpc]
trait Service {
    #[rpc(name = "rpc.discover")]
    fn discover(&self) -> Result<String, jrpc::Error>;
}

fn main() {}
