mod exec;
mod fake_server;
mod providers;
mod tool_cli;
