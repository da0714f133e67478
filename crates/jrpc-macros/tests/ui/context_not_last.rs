#[jrpc::rpc]
trait Service {
    async fn echo(&self, cx: jrpc::RequestContext, value: String) -> Result<String, jrpc::Error>;
}

fn main() {}
