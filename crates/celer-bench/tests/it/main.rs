//! Integration tests: `celer bench` against real servers started in the test.

mod errors;
mod load;
mod modes;
mod support;
