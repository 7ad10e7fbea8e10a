
mod fake_server;
mod exec;
mod providers;
mod tool_cli;
