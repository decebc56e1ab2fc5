//! celer: see ARCHITECTURE.md.
