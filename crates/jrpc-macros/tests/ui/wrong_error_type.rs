#[jrpc::rpc]
trait Service {
    fn parse(&self, text: String) -> Result<i64, std::num::ParseIntError>;
}

fn main() {}
