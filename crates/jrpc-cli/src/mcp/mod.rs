//! `jrpc mcp`: MCP (Model Context Protocol) servers, served and called.
//! One file a command; what the client commands share is in `session.rs`.

mod args;
mod bench;
mod call;
mod input;
mod list;
mod login;
mod prompt;
mod read;
mod request;
mod serve;
mod session;
mod skills;
mod task;
mod watch;

pub use args::McpArgs;
use args::McpCommand;

pub async fn run(args: McpArgs) -> anyhow::Result<std::process::ExitCode> {
    let serve = match args.command {
        McpCommand::Serve(serve) => serve,
        McpCommand::List(list) => return Ok(list::list(list).await),
        McpCommand::Call(call) => return Ok(call::call(call).await),
        McpCommand::Read(read) => return Ok(read::read(read).await),
        McpCommand::Skills(skills) => return Ok(skills::skills(skills).await),
        McpCommand::Request(request) => return Ok(request::request(request).await),
        McpCommand::Prompt(prompt) => return Ok(prompt::prompt(prompt).await),
        McpCommand::Watch(watch) => return Ok(watch::watch(watch).await),
        McpCommand::Bench(bench) => return Ok(bench::bench(bench).await),
        McpCommand::Task(task) => return Ok(task::task(task).await),
        McpCommand::Login(login) => return Ok(login::login(login).await),
        McpCommand::Logout(logout) => return Ok(login::logout(logout).await),
    };
    serve::serve(serve).await
}
