//! celer-apps: see ARCHITECTURE.md.
