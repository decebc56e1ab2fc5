//! celer-test-support: see ARCHITECTURE.md.
