//! Integration tests of the task API: the SQLite store with explicit clocks
//! (`store`), and the HTTP API served on loopback (`api`).

mod api;
mod keys;
mod store;
