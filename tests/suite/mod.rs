mod exec;
mod fake_server;
mod plan;
mod providers;
mod tool_cli;
