#[jrpc::rpc]
trait Service {
    #[rpc(notification)]
    fn ping(&self) -> Result<(), jrpc::Error>;
}

fn main() {}
