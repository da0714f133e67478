#[jrpc::rpc]
trait Service {
    #[rpc(nmae = "other")]
    fn echo(&self, value: String) -> Result<String, jrpc::Error>;
}

fn main() {}
