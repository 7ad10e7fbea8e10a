
mod fake_server;
mod exec;
