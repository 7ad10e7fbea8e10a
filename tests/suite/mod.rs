
mod fake_server;
