//! celer-bench: see ARCHITECTURE.md.
