//! celer-server: see ARCHITECTURE.md.
